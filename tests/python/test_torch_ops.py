"""The reference ops as torch custom ops: registered with fake implementations, so
torch.compile(fullgraph=True) traces a model calling them without a graph break (PyTorch from
PyPI, on the CPU, with fake tensors: nothing runs on a device)."""

import pytest

torch = pytest.importorskip("torch")

import kiln.torch_ops  # noqa: E402,F401  (registers torch.ops.kiln.*)
import kiln  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402


OPS = ["rmsnorm", "softmax", "silu_and_mul", "reduce_sum", "gemm_f32", "gemm_f16", "axpy_"]


def test_every_reference_op_is_a_torch_custom_op():
    for name in OPS:
        assert hasattr(torch.ops.kiln, name), name


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(64, dtype=torch.float16))

    def forward(self, x, gate_up, a, b):
        h = torch.ops.kiln.rmsnorm(x, self.weight, 1e-6)
        h = torch.ops.kiln.softmax(h * 2)
        act = torch.ops.kiln.silu_and_mul(gate_up)
        c = torch.ops.kiln.gemm_f16(a, b)
        s = torch.ops.kiln.reduce_sum(c)
        return h, act, c + s


def test_torch_compile_traces_a_model_calling_them_in_one_graph():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    model = Block()
    compiled = torch.compile(model, backend=backend, fullgraph=True)
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        x = mode.from_tensor(torch.empty(8, 64, dtype=torch.float16))
        gate_up = mode.from_tensor(torch.empty(8, 128, dtype=torch.float16))
        a = mode.from_tensor(torch.empty(16, 32, dtype=torch.float16))
        b = mode.from_tensor(torch.empty(32, 24, dtype=torch.float16))
        h, act, c = compiled(x, gate_up, a, b)
    assert len(graphs) == 1  # fullgraph: no break
    targets = {str(n.target) for n in graphs[0].graph.nodes if n.op == "call_function"}
    for op in ("kiln.rmsnorm", "kiln.softmax", "kiln.silu_and_mul", "kiln.gemm_f16",
               "kiln.reduce_sum"):
        assert any(op in t for t in targets), (op, targets)
    assert (tuple(h.shape), h.dtype) == ((8, 64), torch.float16)
    assert tuple(act.shape) == (8, 64)
    assert (tuple(c.shape), c.dtype) == ((16, 24), torch.float32)


def test_fake_implementation_applies_the_ops_checks_while_tracing():
    with FakeTensorMode():
        x = torch.empty(8, 64, dtype=torch.float16)
        with pytest.raises(kiln.UsageError) as e:
            torch.ops.kiln.rmsnorm(x, torch.empty(63, dtype=torch.float16), 1e-6)
        assert e.value.argument == "weight"
        with pytest.raises(kiln.UsageError):
            torch.ops.kiln.silu_and_mul(torch.empty(8, 64, dtype=torch.float32))


def test_in_place_axpy_traces_as_a_mutation():
    def f(y, x):
        torch.ops.kiln.axpy_(y, x, 0.5)
        return y

    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        y = mode.from_tensor(torch.empty(32, dtype=torch.float32))
        x = mode.from_tensor(torch.empty(32, dtype=torch.float32))
        torch.compile(f, backend=backend, fullgraph=True)(y, x)
    assert any("kiln.axpy_" in str(n.target) for n in graphs[0].graph.nodes)


def test_kiln_ops_registers_no_torch_op_until_kiln_torch_ops_is_imported():
    import subprocess
    import sys

    code = ("import sys, torch, kiln.ops\n"
            "assert 'kiln.torch_ops' not in sys.modules\n"
            "assert not hasattr(torch.ops.kiln, 'rmsnorm')\n"
            "import kiln.torch_ops\n"
            "assert hasattr(torch.ops.kiln, 'rmsnorm')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
