"""The reference package's typed operations, each described once (docs/ops.md).

Pure data, read by cmake/gen_ops.py, which writes from it into the build tree: the public
headers kiln/ops.hpp and kiln/kiln_ops.h, the C++ functions (kiln::ops), the C ABI (kiln_op_*),
the nanobind bindings (kiln._kiln._ops), kiln/ops.py and kiln/torch_ops.py. What all ops share
(the checks, the log line, get and launch) is written by hand once: loader/src/op_support.*,
loader/src/c_api_internal.hpp, python/src/ops_bindings.hpp, python/kiln/_ops_support.py.
Adding an op: its kernel (kernels/), its registry entry (registry/kernels.json), a record here.

A record:
  name        the op: kiln::ops::NAME, kiln_op_NAME, kiln._kiln._ops.NAME, kiln.ops.NAME and
              torch.ops.kiln.NAME (NAME_ when it works in place)
  doc, py_doc the one-line description in the headers, and in Python
  dtypes      the element types built for the family (a trailing DType argument), or absent when
              the element types are fixed by the pointers' types
  params      the C++ arguments after (loader, stream), in order; see the helpers below
  uri         how the specialisation is named: `format` with {dtype}, the `choices` and the
              `values` (C++ expressions), its arguments `args`; or `candidates` (best first,
              each with a C++ condition `when`; cc: the device's), of which the first that loads
              is used (a fallback is logged with its reason)
  choices     values the URI names, each a public function choose_NAME_CHOICE(args) = expr
  launch      the geometry: a public function `fn`(params) { body } called with `call`, shared
              by the ops that name the same `fn`; or `steps`: launches of fixed geometry, one
              per entry of the specialisation, all of the one kernel resolved before the first
  args        the kernel's arguments (names of params, or of `locals`: (type, name, value)),
              per launch
  py          kiln.ops: `shape` (a rule of python/kiln/_ops_support.py: what the arrays must
              be, and the result's shape and dtype), `inputs` (the arrays, by pointer name) and,
              for an op without `dtypes`, the `dtypes` its inputs must have
  returns     "uri" when the C++ function returns the URI it launched (returns_doc: said so)
C++ snippets (expr, body, when, extent) are pasted as written; they may use the helpers of
loader/src/op_support.hpp (ceil_div, grid_rows, gemm_tile, uri_param).
"""


def ptr(name, type="void*", *, extent, elem="dtype", role="in", py=None, align_why="element type",
        overlap=(), workspace=None):
    """A device pointer. extent: (label, a, b), the a x b elements it covers (an overflow is
    refused naming the label); elem: "dtype" or a C type; role: in, out, inout (in place) or
    workspace; py: the kiln.ops argument that gives it (default: its name); overlap: the
    pointers it must not overlap, (name, "apart") or (name, "same_or_apart"); workspace: its
    minimum size in bytes (a C++ expression)."""
    return dict(kind="ptr", name=name, type=type, extent=extent, elem=elem, role=role,
                py=py or name, align_why=align_why, overlap=list(overlap), workspace=workspace)


def size(name, type="int"):
    """A size, refused when <= 0."""
    return dict(kind="size", name=name, type=type)


def scalar(name, type="float", *, check=None, default=None):
    """A scalar; check "finite_nonneg" refuses NaN, infinities and negatives; default: kiln.ops'."""
    return dict(kind="scalar", name=name, type=type, check=check, default=default)


def workspace_bytes(name):
    """The size in bytes of the op's workspace pointer (checked against its minimum)."""
    return dict(kind="workspace_bytes", name=name, type="std::size_t")


# The element types: registry spelling, C++ enumerator, bytes, the kiln_dtype value.
DTYPES = [("f32", "F32", 4), ("f16", "F16", 2), ("bf16", "BF16", 2)]

OPS = [
    dict(
        name="axpy",
        doc="y = alpha * x + y over n elements; x == y is allowed, partial overlap is not.",
        py_doc="y = alpha * x + y (in place); returns y.",
        dtypes=["f32", "f16", "bf16"],
        params=[
            ptr("y", "void*", role="inout", extent=("n", "n", "1")),
            ptr("x", "const void*", extent=("n", "n", "1"), overlap=[("y", "same_or_apart")]),
            size("n", "long long"),
            scalar("alpha"),
        ],
        uri=dict(format="axpy_dtype_{dtype}", args=["dtype"]),
        launch=dict(fn="axpy_launch", params="long long n", call="n",
                    body="return {{static_cast<unsigned>(std::min<long long>((n + 255) / 256, "
                         "kMaxGridX)), 1, 1}, {256, 1, 1}};"),
        args=["n", "alpha", "x", "y"],
        py=dict(shape="elementwise", inputs=["y", "x"]),
    ),
    dict(
        name="reduce_sum",
        doc="out[0] = sum of in[0..n) (accumulated in float, rounded once to dtype). Two "
            "launches.",
        py_doc="The sum of x's elements into a 1-element array (accumulated in float); returns "
               "it.",
        dtypes=["f32", "f16", "bf16"],
        params=[
            ptr("out", "void*", role="out", extent=("1", "1", "1")),
            ptr("in", "const void*", extent=("n", "n", "1"), py="x"),
            size("n", "long long"),
            # kernels/reduce_sum.cu: KILN_REDUCE_BLOCKS (256) partial sums, one float each.
            ptr("workspace", "void*", role="workspace", elem="float", align_why="float partial sums",
                extent=("workspace", "256", "1"), workspace="256 * sizeof(float)",
                overlap=[("in", "apart"), ("out", "apart")]),
            workspace_bytes("workspace_bytes"),
        ],
        uri=dict(format="reduce_sum_dtype_{dtype}", args=["dtype"]),
        launch=dict(steps=[
            dict(grid="256", block="256", args=["n", "in", "workspace"]),
            dict(grid="1", block="256", args=["partials", "workspace", "out"]),
        ]),
        locals=[("int", "partials", "256")],
        py=dict(shape="sum", inputs=["in"]),
    ),
    dict(
        name="rmsnorm",
        doc="Row-wise RMS norm of in[rows, cols] with weight[cols]; out may equal in.",
        py_doc="Row-wise RMS norm of x [..., cols] with weight [cols]; out may be x. Returns out.",
        dtypes=["f32", "f16", "bf16"],
        params=[
            ptr("out", "void*", role="out", extent=("rows x cols", "rows", "cols"),
                overlap=[("in", "same_or_apart")]),
            ptr("in", "const void*", extent=("rows x cols", "rows", "cols"), py="x"),
            ptr("weight", "const void*", extent=("cols", "cols", "1"), overlap=[("out", "apart")]),
            size("rows"),
            size("cols"),
            scalar("eps", check="finite_nonneg", default="1e-6"),
        ],
        # Each thread strides over cols / BLOCK elements; a wider block pays off only once a row
        # has several elements per thread (the block reduction costs the same for any length).
        choices=[dict(name="block", params="int cols", expr="cols <= 256 ? 128 : cols <= 1024 ? "
                      "256 : 512", doc="128, 256 or 512")],
        uri=dict(format="rmsnorm_dtype_{dtype}_block_{block}", args=["dtype", "cols"]),
        launch=dict(fn="rmsnorm_launch", params="int rows, int cols", call="rows, cols",
                    body="return {{grid_rows(rows), 1, 1}, "
                         "{static_cast<unsigned>(choose_rmsnorm_block(cols)), 1, 1}};"),
        args=["out", "in", "weight", "rows", "cols", "eps"],
        py=dict(shape="rows", inputs=["in", "weight"]),
    ),
    dict(
        name="softmax",
        doc="Row-wise softmax of in[rows, cols]; out may equal in.",
        py_doc="Row-wise softmax of x [..., cols]; out may be x. Returns out.",
        dtypes=["f32", "f16", "bf16"],
        params=[
            ptr("out", "void*", role="out", extent=("rows x cols", "rows", "cols"),
                overlap=[("in", "same_or_apart")]),
            ptr("in", "const void*", extent=("rows x cols", "rows", "cols"), py="x"),
            size("rows"),
            size("cols"),
        ],
        choices=[dict(name="block", params="int cols", expr="cols <= 512 ? 128 : 256",
                      doc="128 or 256")],
        uri=dict(format="softmax_dtype_{dtype}_block_{block}", args=["dtype", "cols"]),
        launch=dict(fn="softmax_launch", params="int rows, int cols", call="rows, cols",
                    body="return {{grid_rows(rows), 1, 1}, "
                         "{static_cast<unsigned>(choose_softmax_block(cols)), 1, 1}};"),
        args=["out", "in", "rows", "cols"],
        py=dict(shape="rows", inputs=["in"]),
    ),
    dict(
        name="silu_and_mul",
        doc="in[rows, 2d] -> out[rows, d] = silu(gate) * up; dtype f16 or bf16; out must not "
            "overlap in.",
        py_doc="x [..., 2d] (f16 or bf16) -> out [..., d] = silu(gate) * up. Returns out.",
        dtypes=["f16", "bf16"],
        params=[
            ptr("out", "void*", role="out", extent=("rows x d", "rows", "d"),
                overlap=[("in", "apart")]),
            ptr("in", "const void*", extent=("rows x 2d", "rows", "2LL * d"), py="x"),
            size("rows", "long long"),
            size("d"),
        ],
        uri=dict(format="silu_and_mul_dtype_{dtype}", args=["dtype"]),
        launch=dict(fn="silu_and_mul_launch", params="long long rows, int d", call="rows, d",
                    body="return {{grid_rows(rows), 1, 1}, "
                         "{static_cast<unsigned>(d >= 1024 ? 1024 : (d + 31) / 32 * 32), 1, 1}};"),
        args=["out", "in", "rows", "d"],
        py=dict(shape="gated_rows", inputs=["in"]),
    ),
    dict(
        name="gemm_f32",
        doc="C[M, N] = A[M, K] B[K, N], row-major float; C must not overlap A or B.",
        py_doc="out [M, N] = a [M, K] @ b [K, N], float32 row-major. Returns out.",
        params=[
            ptr("C", "float*", role="out", elem="float", align_why="float output",
                extent=("M x N", "M", "N"), py="out", overlap=[("A", "apart"), ("B", "apart")]),
            ptr("A", "const float*", elem="float", extent=("M x K", "M", "K"), py="a"),
            ptr("B", "const float*", elem="float", extent=("K x N", "K", "N"), py="b"),
            size("M"),
            size("N"),
            size("K"),
        ],
        # 128-wide tiles only when a dimension is large: small problems need the extra blocks of
        # 64-wide tiles to fill the GPU's SMs.
        choices=[],
        uri=dict(format="gemm_f32_bm_{bm}_bn_{bn}_bk_8", args=["M", "N", "K"],
                 values=dict(bm="gemm_tile(M)", bn="gemm_tile(N)")),
        launch=dict(fn="gemm_launch", params="const std::string& uri, int M, int N",
                    call="uri, M, N",
                    doc="gemm_f32 / gemm_f16_tc / wgmma",
                    body="""if (uri.rfind("hopper_wgmma_", 0) == 0)
    return {{ceil_div(N, uri_param(uri, "bn")), ceil_div(M, 64), 1}, {128, 1, 1}};
  const int bm = uri_param(uri, "bm"), bn = uri_param(uri, "bn");
  if (bm <= 0 || bn <= 0) throw Error(ErrorKind::Internal, "gemm_launch: not a GEMM URI: " + uri);
  return {{ceil_div(N, bn), ceil_div(M, bm), 1}, {256, 1, 1}};"""),
        args=["M", "N", "K", "A", "B", "C"],
        py=dict(shape="matmul", inputs=["A", "B"], dtypes=["f32"]),
    ),
    dict(
        name="gemm_f16",
        doc="C[M, N] (float) = A[M, K] B[K, N] with A, B row-major f16 (as raw 16-bit storage).",
        returns_doc="Returns the URI it launched (wgmma on CC 9.0 when its artifact loads, else "
                    "tensor cores).",
        py_doc="out [M, N] (float32) = a [M, K] @ b [K, N], a and b float16. Returns out.",
        params=[
            ptr("C", "float*", role="out", elem="float", align_why="float output",
                extent=("M x N", "M", "N"), py="out", overlap=[("A", "apart"), ("B", "apart")]),
            ptr("A", "const void*", elem="std::uint16_t", extent=("M x K", "M", "K"), py="a"),
            ptr("B", "const void*", elem="std::uint16_t", extent=("K x N", "K", "N"), py="b"),
            size("M"),
            size("N"),
            size("K"),
        ],
        # On CC 9.0 the sm_90a wgmma kernel, then the tensor-core kernel; elsewhere only the
        # latter. A candidate other than the last is used only from an AOT build (NVRTC's sm_90
        # image of the wgmma kernel only traps).
        uri=dict(candidates=[dict(format="hopper_wgmma_bn_{bn}", when="cc == 90"),
                             dict(format="gemm_f16_tc_bm_{bm}_bn_{bn}")],
                 args=["M", "N", "K", "cc"],
                 values=dict(bm="gemm_tile(M)", bn="gemm_tile(N)")),
        launch=dict(fn="gemm_launch", call="uri, M, N"),
        args=["M", "N", "K", "A", "B", "C"],
        returns="uri",
        py=dict(shape="matmul", inputs=["A", "B"], dtypes=["f16"]),
    ),
]
