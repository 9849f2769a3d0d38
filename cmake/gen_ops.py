#!/usr/bin/env python3
"""Writes every spelling of the typed ops from the one table, loader/ops_table.py (its docstring
says what a record holds), into OUT_DIR (CMake runs it: CMakeLists.txt, kiln_ops_gen):

  include/kiln/ops.hpp      the C++ API (installed)          loader/ops.cpp     its definitions
  include/kiln/kiln_ops.h   the C ABI (installed)            loader/c_ops.cpp   its definitions
  python/ops_bindings.cpp   kiln._kiln._ops (nanobind)       python/kiln/ops.py, torch_ops.py

A file is rewritten only when its text changes, so an unchanged table rebuilds nothing.
  cmake/gen_ops.py TABLE OUT_DIR
"""
import os
import sys
import types

GENERATED = "Generated from loader/ops_table.py by cmake/gen_ops.py: edit those, not this file."


def load_table(path):
    """The table's names (DTYPES, OPS), run from its text: nothing is cached beside it."""
    names = {}
    exec(compile(open(path).read(), path, "exec"), names)
    return types.SimpleNamespace(**names)


# ---- the facts every output derives from an op record -------------------------------------

def ptrs(op, role=None):
    return [p for p in op["params"] if p["kind"] == "ptr" and (role is None or p["role"] == role)]


def has_dtype(op):
    return bool(op.get("dtypes"))


def cpp_params(op):
    """[(C++ type, name)] after (loader, stream)."""
    out = [(p["type"], p["name"]) for p in op["params"]]
    if has_dtype(op):
        out.append(("DType", "dtype"))
    return out


def c_type(t):
    return {"DType": "kiln_dtype", "std::size_t": "size_t"}.get(t, t)


def returns_uri(op):
    return op.get("returns") == "uri"


def workspace(op):
    ws = ptrs(op, "workspace")
    return ws[0] if ws else None


def uri_arg_types(op):
    types = {n: ty for ty, n in cpp_params(op)}
    types["cc"] = "int"
    return [(types[a], a) for a in op["uri"]["args"]]


def uri_expr(op, fmt):
    """A C++ expression building the URI of `fmt` ({dtype}, {choice}, {value})."""
    values = dict(op["uri"].get("values", {}))
    values["dtype"] = "to_string(dtype)"
    for c in op.get("choices", []):
        values[c["name"]] = f"choose_{op['name']}_{c['name']}({c['params'].split()[-1]})"
    parts, rest = [], fmt
    while "{" in rest:
        head, _, tail = rest.partition("{")
        key, _, rest = tail.partition("}")
        if head:
            parts.append(f'"{head}"')
        v = values[key]
        parts.append(v if key == "dtype" else f"std::to_string({v})")
    if rest:
        parts.append(f'"{rest}"')
    parts[0] = f"std::string({parts[0]})"
    return " + ".join(parts)


def launch_fns(ops):
    """The public geometry functions, each once, in table order."""
    seen, out = set(), []
    for op in ops:
        la = op["launch"]
        if "fn" in la and "body" in la and la["fn"] not in seen:
            seen.add(la["fn"])
            out.append(la)
    return out


def decl(head, params, tail, width=100):
    """head(params)tail, broken after commas and aligned to the parenthesis when too long."""
    one = f"{head}({', '.join(params)}){tail}"
    if len(one) <= width:
        return one
    lines, line, indent = [], f"{head}(", " " * (len(head) + 1)
    for i, p in enumerate(params):
        piece = p + (", " if i + 1 < len(params) else f"){tail}")
        if len(line) + len(piece.rstrip()) > width and line.strip() not in ("", f"{head}("):
            lines.append(line.rstrip())
            line = indent
        line += piece
    lines.append(line.rstrip())
    return "\n".join(lines)


def wrap(text, width, prefix):
    words, lines, line = text.split(), [], prefix
    for w in words:
        if len(line) + len(w) + 1 > width and line.strip() != prefix.strip():
            lines.append(line.rstrip())
            line = prefix
        line += w + " "
    lines.append(line.rstrip())
    return "\n".join(lines)


# ---- include/kiln/ops.hpp -------------------------------------------------------------------

def ops_hpp(t):
    o = [f"""#pragma once
// {GENERATED}
// Typed host functions over the loader, one per kernel family (docs/ops.md). Each one:
//   1. validates its arguments and throws Error{{Usage}} naming the bad argument, before any
//      get() or launch (null pointers, sizes <= 0 or overflowing, misalignment, workspace);
//   2. picks the specialisation URI from the arguments (choose_uri_*: pure, unit-tested);
//   3. writes the KILN_API_LOG line (level 1: name, 2: arguments) before the launch;
//   4. gets the kernel with Loader::get(uri, stream) (capture-aware) and launches it.
// Pointers are device pointers; `stream` is a CUstream (nullptr = the legacy default stream).
// Nothing here allocates device memory: an op that needs a workspace takes it explicitly.
#include <cstddef>
#include <string>
#include <vector>

#include "kiln/export.h"
#include "kiln/loader.hpp"

namespace kiln::ops {{

enum class DType {{ {", ".join(e for _, e, _ in t.DTYPES)} }};

KILN_API const char* to_string(DType dtype);     // {", ".join(f'"{n}"' for n, _, _ in t.DTYPES)} (the registry's spelling)
KILN_API std::size_t element_size(DType dtype);  // {", ".join(str(b) for _, _, b in t.DTYPES)}

// ---- URI choice: pure functions of the arguments (no I/O, no device) ------------------------"""]
    for op in t.OPS:
        for c in op.get("choices", []):
            o.append(f"KILN_API int choose_{op['name']}_{c['name']}({c['params']});  // {c['doc']}")
        args = ", ".join(f"{ty} {n}" for ty, n in uri_arg_types(op))
        if "candidates" in op["uri"]:
            o.append(f"// The candidates for {op['name']}, best first (cc: the device's compute "
                     f"capability, 90 = 9.0);\n// {op['name']} uses the first one that loads, and "
                     "logs every fallback with its reason.")
            o.append(f"KILN_API std::vector<std::string> choose_uris_{op['name']}({args});")
        else:
            o.append(f"KILN_API std::string choose_uri_{op['name']}({args});")
    o.append("""
// ---- Launch geometry (pure), exposed for tests and for callers building graphs by hand ------
struct Launch {
  Loader::Dim3 grid;
  Loader::Dim3 block;
};""")
    for la in launch_fns(t.OPS):
        doc = f"  // {la['doc']}" if la.get("doc") else ""
        o.append(f"KILN_API Launch {la['fn']}({la['params']});{doc}")
    for op in t.OPS:
        ws = workspace(op)
        if ws:
            o.append(f"\n// Bytes of workspace {op['name']} needs ({ws['workspace']}), "
                     f"{ws['elem']}-aligned.")
            o.append(f"KILN_API std::size_t {op['name']}_workspace_bytes();")
    o.append("\n// ---- The operations ------------------------------------------------------------------------")
    for op in t.OPS:
        ret = "std::string" if returns_uri(op) else "void"
        params = ["Loader& loader", "void* stream"] + [f"{ty} {n}" for ty, n in cpp_params(op)]
        doc = op["doc"] + (" " + op["returns_doc"] if op.get("returns_doc") else "")
        o.append(wrap(doc, 100, "// "))
        o.append(decl(f"KILN_API {ret} {op['name']}", params, ";"))
    o.append("\n}  // namespace kiln::ops\n")
    return "\n".join(o)


# ---- include/kiln/kiln_ops.h ----------------------------------------------------------------

def kiln_ops_h(t):
    o = [f"""/* {GENERATED}
 * kiln typed kernel API, C ABI: the functions of kiln/ops.hpp for C and language bindings.
 * Each returns a kiln_status (values = CLI exit codes, see kiln.h); bad arguments are
 * KILN_ERROR_USAGE and are reported before anything is loaded or launched. The message of the
 * calling thread's last failure is kiln_last_error() (kiln_ops_last_error() is the same). Pointers
 * are device pointers; `stream` is a CUstream (NULL = the legacy default stream). */
#ifndef KILN_KILN_OPS_H
#define KILN_KILN_OPS_H

#include <stddef.h>

#include "kiln/export.h"

#include "kiln/kiln.h"

#ifdef __cplusplus
extern "C" {{
#endif

/* KILN_DTYPE_MAX_ENUM keeps the enum int-sized so any int a C caller passes is a valid value
   that kiln can reject with KILN_ERROR_USAGE. */
typedef enum kiln_dtype {{"""]
    for i, (_, e, _) in enumerate(t.DTYPES):
        o.append(f"  KILN_DTYPE_{e} = {i},")
    o.append("  KILN_DTYPE_MAX_ENUM = 0x7fffffff\n} kiln_dtype;\n")
    for op in t.OPS:
        ws = workspace(op)
        if ws:
            o.append(f"/* Bytes of workspace kiln_op_{op['name']} needs ({ws['elem']}-aligned). */")
            o.append(f"KILN_API size_t kiln_op_{op['name']}_workspace_bytes(void);")
        params = ["kiln_loader* loader", "void* stream"] + [f"{c_type(ty)} {n}"
                                                            for ty, n in cpp_params(op)]
        o.append("/* " + wrap(op["doc"], 100, "   ")[3:] + " */")
        o.append(decl(f"KILN_API kiln_status kiln_op_{op['name']}", params, ";"))
    o.append("""
/* The message of the calling thread's last failing kiln_op_* call ("" if none). */
KILN_API const char* kiln_ops_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* KILN_KILN_OPS_H */
""")
    return "\n".join(o)


# ---- loader/ops.cpp -------------------------------------------------------------------------

def elem_size(p):
    return "es" if p["elem"] == "dtype" else f"sizeof({p['elem']})"


def op_body(op, dtypes):
    """The body of kiln::ops::NAME: checks, URI, log line, launch (dtypes: the table's)."""
    name = op["name"]
    o = [f'  const char* op = "{name}";']
    if has_dtype(op):
        built = ", ".join(f"DType::{e}" for n, e, _ in dtypes if n in op["dtypes"])
        o.append(f"  detail::require_dtype(op, dtype, {{{built}}});")
        o.append("  const std::size_t es = element_size(dtype);")
    for p in ptrs(op):
        o.append(f'  detail::require_pointer(op, "{p["name"]}", {p["name"]});')
    for p in op["params"]:
        if p["kind"] == "size":
            o.append(f'  detail::require_positive(op, "{p["name"]}", {p["name"]});')
    for p in ptrs(op):
        label, a, b = p["extent"]
        o.append(f'  [[maybe_unused]] const std::size_t span_{p["name"]} = detail::checked_bytes(op, "{label}", '
                 f"{a}, {b}, {elem_size(p)});")
    for p in ptrs(op):
        o.append(f'  detail::require_aligned(op, "{p["name"]}", {p["name"]}, {elem_size(p)}, '
                 f'"{p["align_why"]}");')
    ws = workspace(op)
    if ws:
        wb = next(p for p in op["params"] if p["kind"] == "workspace_bytes")
        o.append(f'  detail::require_workspace(op, "{wb["name"]}", {wb["name"]}, '
                 f'{name}_workspace_bytes(), "kiln::ops::{name}_workspace_bytes()");')
    for p in ptrs(op):
        for other, rule in p["overlap"]:
            o.append(f'  detail::require_apart(op, "{p["name"]}", {p["name"]}, span_{p["name"]}, '
                     f'"{other}", {other}, span_{other}, {"true" if rule == "same_or_apart" else "false"});')
    for p in op["params"]:
        if p["kind"] == "scalar" and p["check"] == "finite_nonneg":
            o.append(f'  detail::require_finite_nonneg(op, "{p["name"]}", {p["name"]});')
    log = ", ".join(['{"uri", uri}', '{"stream", detail::show(stream)}'] +
                    [f'{{"{n}", detail::show({n})}}' for _, n in cpp_params(op)])
    log_stmt = f"  if (detail::logging()) detail::log_call(op, {{{log}}});"
    for ty, n, v in op.get("locals", []):
        o.append(f"  {ty} {n} = {v};")
    la = op["launch"]
    steps = la.get("steps") or [dict(entry=0, args=op["args"], geometry=f"{la['fn']}({la['call']})")]
    arrays, step_list = [], []
    for i, s in enumerate(steps):
        arrays.append(f"  void* args{i}[] = {{{', '.join('&' + a for a in s['args'])}}};")
        geo = s.get("geometry") or f"Launch{{{{{s['grid']}, 1, 1}}, {{{s['block']}, 1, 1}}}}"
        step_list.append(f"{{{s.get('entry', i)}, {geo}, args{i}}}")
    steps_expr = "{" + ", ".join(step_list) + "}"
    uri_args = ", ".join(a for a in op["uri"]["args"] if a != "cc")
    if "candidates" in op["uri"]:
        o.append("  std::string uri;")
        o.append(f"  const KernelHandle& kernel = detail::get_first_usable(loader, op, stream, "
                 f"[&](int cc) {{ return choose_uris_{name}({uri_args}, cc); }}, uri);")
        o.append(log_stmt)
        o += arrays
        o.append(f"  detail::launch(loader, kernel, stream, {steps_expr});")
    else:
        o.append(f"  const std::string uri = choose_uri_{name}({uri_args});")
        o.append(log_stmt)
        o += arrays
        o.append(f"  detail::launch(loader, uri, stream, {steps_expr});")
    if returns_uri(op):
        o.append("  return uri;")
    return "\n".join(o)


def ops_cpp(t):
    o = [f"""// {GENERATED}
// The typed kernel API (kiln/ops.hpp): each op's checks, URI, log line and launch, in terms of
// the helpers every op shares (op_support.hpp).
#include "kiln/ops.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/error.hpp"
#include "op_support.hpp"

namespace kiln::ops {{

using namespace detail;  // the geometry helpers the table's snippets use

const char* to_string(DType dtype) {{
  switch (dtype) {{"""]
    for n, e, _ in t.DTYPES:
        o.append(f'    case DType::{e}:\n      return "{n}";')
    o.append('  }\n  return "?";\n}\n')
    o.append("std::size_t element_size(DType dtype) {\n  switch (dtype) {")
    for _, e, b in t.DTYPES:
        o.append(f"    case DType::{e}:\n      return {b};")
    o.append("  }\n  return 0;\n}\n")
    for op in t.OPS:
        for c in op.get("choices", []):
            o.append(f"int choose_{op['name']}_{c['name']}({c['params']}) {{ return {c['expr']}; }}\n")
        args = ", ".join(f"[[maybe_unused]] {ty} {n}" for ty, n in uri_arg_types(op))
        if "candidates" in op["uri"]:
            o.append(f"std::vector<std::string> choose_uris_{op['name']}({args}) {{\n"
                     "  std::vector<std::string> uris;")
            for c in op["uri"]["candidates"]:
                cond = f"if ({c['when']}) " if c.get("when") else ""
                o.append(f"  {cond}uris.push_back({uri_expr(op, c['format'])});")
            o.append("  return uris;\n}\n")
        else:
            o.append(f"std::string choose_uri_{op['name']}({args}) {{\n"
                     f"  return {uri_expr(op, op['uri']['format'])};\n}}\n")
    for la in launch_fns(t.OPS):
        o.append(f"Launch {la['fn']}({la['params']}) {{\n  {la['body']}\n}}\n")
    for op in t.OPS:
        ws = workspace(op)
        if ws:
            o.append(f"std::size_t {op['name']}_workspace_bytes() {{ return {ws['workspace']}; }}\n")
    for op in t.OPS:
        ret = "std::string" if returns_uri(op) else "void"
        params = ", ".join(["Loader& loader", "void* stream"] +
                           [f"{ty} {n}" for ty, n in cpp_params(op)])
        o.append(f"{ret} {op['name']}({params}) {{\n{op_body(op, t.DTYPES)}\n}}\n")
    o.append("}  // namespace kiln::ops\n")
    return "\n".join(o)


# ---- loader/c_ops.cpp -----------------------------------------------------------------------

def c_ops_cpp(t):
    o = [f"""// {GENERATED}
// The C ABI of the typed kernel API (kiln/kiln_ops.h): each function calls its kiln::ops
// counterpart through c_api::guarded_op (c_api_internal.hpp), which turns every exception into a
// status and the thread's last error. An out-of-range kiln_dtype becomes an invalid DType, which
// the C++ checks reject by name.
#include "kiln/kiln_ops.h"

#include "c_api_internal.hpp"
#include "kiln/loader.hpp"
#include "kiln/ops.hpp"

extern "C" {{
"""]
    for op in t.OPS:
        name = op["name"]
        if workspace(op):
            o.append(f"size_t kiln_op_{name}_workspace_bytes(void) {{\n"
                     f"  return kiln::ops::{name}_workspace_bytes();\n}}\n")
        params = ", ".join(["kiln_loader* loader", "void* stream"] +
                           [f"{c_type(ty)} {n}" for ty, n in cpp_params(op)])
        call = ", ".join(["l", "stream"] + [
            f"static_cast<kiln::ops::DType>({n})" if ty == "DType" else n
            for ty, n in cpp_params(op)])
        o.append(f"kiln_status kiln_op_{name}({params}) {{\n"
                 f'  return kiln::c_api::guarded_op("kiln_op_{name}", loader,\n'
                 f"                               [&](kiln::Loader& l) {{ kiln::ops::{name}({call}); }});\n}}\n")
    o.append("}  // extern \"C\"\n")
    return "\n".join(o)


# ---- python/ops_bindings.cpp ----------------------------------------------------------------

def py_arg_name(p_name, kind):
    n = p_name.lower() if kind == "ptr" else p_name
    return n + "_" if n in ("in", "lambda", "from", "is") else n


def bindings_cpp(t):
    o = [f"""// {GENERATED}
// kiln::ops (kiln/ops.hpp) over raw device pointers as ints (ops_bindings.hpp): what kiln/ops.py
// calls once it has checked the arrays. The GIL is released around each op (get() may read a
// store, download or JIT).
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>

#include "kernel_args.hpp"
#include "kiln/ops.hpp"
#include "ops_bindings.hpp"
#include "python_loader.hpp"

namespace kiln::python {{

using namespace nb::literals;

void bind_ops(nb::module_& m) {{
  nb::module_ o = m.def_submodule("_ops", "kiln::ops over device pointers (kiln/ops.py)");"""]
    for op in t.OPS:
        name = op["name"]
        lam, call, names = ["PythonLoader& pl", "nb::handle s"], ["*live", "st"], []
        for ty, n in cpp_params(op):
            kind = next((p["kind"] for p in op["params"] if p["name"] == n), "dtype")
            names.append(py_arg_name(n, kind))
            if kind == "ptr":
                lam.append(f"OpPtr {n}")
                call.append(f"static_cast<{ty}>(as_ptr({n}))")
            elif kind == "dtype":
                lam.append("const std::string& dtype")
                call.append("dtype_named(dtype)")
            else:
                lam.append(f"{ty} {n}")
                call.append(n)
        ret = "std::string" if returns_uri(op) else "void"
        body = (f"    std::shared_ptr<Loader> live = pl.live();\n"
                f"    void* st = stream_handle(s);\n"
                + ("    const ops::DType dtype_value = dtype_named(dtype);\n" if has_dtype(op) else ""))
        call_s = ", ".join("dtype_value" if c == "dtype_named(dtype)" else c for c in call)
        if returns_uri(op):
            body += (f"    std::string uri;\n    without_gil([&] {{ uri = ops::{name}({call_s}); }});\n"
                     "    return uri;\n")
        else:
            body += f"    without_gil([&] {{ ops::{name}({call_s}); }});\n"
        kw = ", ".join(['"loader"_a', '"stream"_a.none()'] + [f'"{n}"_a' for n in names])
        o.append(f'  o.def(\n      "{name}",\n      []({", ".join(lam)}) -> {ret} {{\n{body}      }},\n'
                 f"      {kw});")
        if workspace(op):
            o.append(f'  o.def("{name}_workspace_bytes", &ops::{name}_workspace_bytes);')
        args = uri_arg_types(op)
        lam_args = ", ".join("const std::string& dtype" if ty == "DType" else f"{ty} {n}"
                             for ty, n in args)
        call_args = ", ".join("dtype_named(dtype)" if ty == "DType" else n for ty, n in args)
        fn = f"choose_uris_{name}" if "candidates" in op["uri"] else f"choose_uri_{name}"
        o.append(f'  o.def("{fn}", []({lam_args}) {{ return ops::{fn}({call_args}); }});')
    o.append("}\n\n}  // namespace kiln::python\n")
    return "\n".join(o)


# ---- python/kiln/ops.py and torch_ops.py ----------------------------------------------------

def py_dtypes(op):
    return tuple(op.get("dtypes") or op["py"]["dtypes"])


def py_inputs(op):
    by_name = {p["name"]: p for p in ptrs(op)}
    return [by_name[n] for n in op["py"]["inputs"]]


def py_scalars(op):
    return [p for p in op["params"] if p["kind"] == "scalar"]


def ops_py(t):
    names = [op["name"] for op in t.OPS] + [f"{op['name']}_workspace_bytes" for op in t.OPS
                                             if workspace(op)]
    o = [f'''"""The reference package's typed operations (kiln/ops.hpp) on device arrays.

Each takes PyTorch CUDA tensors, CuPy arrays or any array with `__cuda_array_interface__` or
DLPack, checks what the kernels need (a CUDA array, the dtype, the shape, contiguity; a
UsageError names the argument), and launches on the reference package's loader:
`kiln.load("kiln-kernels")` on first use, or the one given with `loader=` or `use_loader()`.
The stream is `stream=` (an int, or an object with `cuda_stream` / `__cuda_stream__`), else the
current stream of the framework the arrays come from (torch, CuPy), else the legacy default
stream. Outputs are allocated through that framework when not given (`out=`).

The same ops as torch custom ops (`torch.ops.kiln.NAME`) are `import kiln.torch_ops`.

{GENERATED}
"""

from __future__ import annotations

from kiln import _kiln
from kiln import _ops_support as _s
from kiln._ops_support import (FLOAT_DTYPES, REFERENCE_PACKAGE, check_dtype, check_same,
                               gemm_shapes, reference_loader, rows_cols, use_loader)

__all__ = ["FLOAT_DTYPES", "REFERENCE_PACKAGE", "check_dtype", "check_same", "gemm_shapes",
           "reference_loader", "rows_cols", "use_loader",
           {", ".join(repr(n) for n in names)}]
''']
    for op in t.OPS:
        name, ins, ws = op["name"], py_inputs(op), workspace(op)
        out_p = (ptrs(op, "out") or [None])[0]
        sig = [p["py"] for p in ins]
        sig += [f"{p['name']}: float" + (f" = {p['default']}" if p["default"] else "")
                for p in py_scalars(op)]
        if out_p:
            sig.append("out=None")
        sig.append("*")
        if ws:
            sig.append("workspace=None")
        sig += ["stream=None", "loader=None"]
        first = ins[0]["py"]
        arrays = "{" + ", ".join(f'"{p["py"]}": {p["py"]}' for p in ins) + "}"
        doc = [op["py_doc"], "", "Parameters:"]
        doc += [f"  {p['py']}: a CUDA array ({', '.join(py_dtypes(op))})" for p in ins]
        doc += [f"  {p['name']}: a float" for p in py_scalars(op)]
        if out_p:
            doc.append("  out: the result array; None: allocated like the first input")
        if ws:
            doc.append(f"  workspace: scratch of {name}_workspace_bytes() bytes; None: allocated")
        doc += ["  stream: an int CUstream or an object with cuda_stream / __cuda_stream__; "
                "None: the",
                "    current stream of the inputs' framework",
                "  loader: a kiln.Loader of kiln-kernels; None: use_loader()'s or "
                "kiln.load(\"kiln-kernels\")",
                "An empty input launches nothing (a reduction over no element gives zeros)."]
        o.append(f"\n\ndef {name}({', '.join(sig)}):\n    \"\"\"" + "\n    ".join(doc).replace("\n    \n", "\n\n")
                 + "\n    \"\"\"")
        for p in py_scalars(op):
            o.append(f"    {p['name']} = _s.scalar({p['name']!r}, {p['name']})")
        o.append(f"    st = _s.launch_stream(stream, [{', '.join(p['py'] for p in ins)}])")
        o.append(f"    arr = _s.arrays({arrays}, st)")
        o.append(f"    r = _s.RULES[{op['py']['shape']!r}](_s.specs(arr), {py_dtypes(op)!r})")
        device = ["**arr"]
        if out_p:
            o.append(f'    out, o = _s.output(out, arr["{first}"], r, st)')
            device.append('"out": o')
        if ws:
            o.append(f'    workspace, w, ws_bytes = _s.workspace(workspace, arr["{first}"], '
                     f"_kiln._ops.{name}_workspace_bytes(), st)")
            device.append('"workspace": w')
        o.append(f"    _s.same_device({{{', '.join(device)}}})")
        limits = {p["name"]: (2**63 - 1 if p["type"] == "long long" else 2**31 - 1)
                  for p in op["params"] if p["kind"] == "size"}
        o.append(f"    _s.check_sizes(r, {limits!r}, {first!r})")
        o.append(f"    if _s.nothing_to_launch(r, {'out' if out_p else 'None'}):\n"
                 f"        return {'out' if out_p else first}")
        call = []
        for ty, n in cpp_params(op):
            p = next((p for p in op["params"] if p["name"] == n), None)
            if p is None:
                call.append("r.dtype")
            elif p["kind"] == "ptr":
                call.append({"out": "o.ptr", "workspace": "w.ptr"}.get(p["role"], f'arr["{p["py"]}"].ptr'))
            elif p["kind"] == "size":
                call.append(f'r.dims["{n}"]')
            elif p["kind"] == "scalar":
                call.append(n)
            else:
                call.append("ws_bytes")
        o.append(f"    _kiln._ops.{name}(_s.loader(loader), st, "
                 f"{', '.join(call)})")
        o.append(f"    return {'out' if out_p else first}")
        if ws:
            o.append(f"\n\ndef {name}_workspace_bytes() -> int:\n"
                     f"    \"\"\"The bytes of the workspace {name} takes (workspace=).\"\"\"\n"
                     f"    return _kiln._ops.{name}_workspace_bytes()")
    return "\n".join(o) + "\n"


def torch_ops_py(t):
    o = [f'''"""kiln's reference ops as torch custom ops (namespace `kiln`): `import kiln.torch_ops`
registers them (it imports torch and kiln.ops; kiln.ops never imports this module). Each has a
fake (meta) implementation that applies the same shape and dtype rules as kiln.ops and allocates
nothing on a device, so `torch.compile(..., fullgraph=True)` traces a model calling them without
a graph break, and a bad shape fails while tracing with the same kiln.UsageError as at run time.
The real implementations run kiln.ops on the tensors, on torch's current stream.

{GENERATED}
"""

from __future__ import annotations

import torch
from torch.library import custom_op

from kiln import _ops_support as _s
from kiln import ops
''']
    for op in t.OPS:
        name, ins = op["name"], py_inputs(op)
        in_place = any(p["role"] == "inout" for p in ins)
        tname = name + "_" if in_place else name
        params = [f"{p['py']}: torch.Tensor" for p in ins] + [f"{p['name']}: float"
                                                               for p in py_scalars(op)]
        plain = [p["py"] for p in ins] + [p["name"] for p in py_scalars(op)]
        call = [p["py"] if p["role"] == "inout" else f"{p['py']}.contiguous()" for p in ins]
        call += [p["name"] for p in py_scalars(op)]
        mutates = "(" + "".join(f'"{p["py"]}", ' for p in ins if p["role"] == "inout").rstrip(" ") + ")"
        ret = "None" if in_place else "torch.Tensor"
        body = f"ops.{name}({', '.join(call)})"
        tensors = "{" + ", ".join(f'"{p["py"]}": {p["py"]}' for p in ins) + "}"
        o.append(f'\n@custom_op("kiln::{tname}", mutates_args={mutates}, device_types="cuda")\n'
                 f"def {tname}({', '.join(params)}) -> {ret}:\n"
                 f"    {'' if in_place else 'return '}{body}\n\n\n"
                 f"@{tname}.register_fake\n"
                 f"def _{tname}_fake({', '.join(plain)}):\n"
                 + "".join(f"    _s.finite_nonneg({name!r}, {p['name']!r}, {p['name']})\n"
                           for p in py_scalars(op) if p["check"] == "finite_nonneg")
                 + f"    {'' if in_place else 'return '}_s.fake_result({op['py']['shape']!r}, "
                 f"{py_dtypes(op)!r}, {tensors}, {mutates})\n")
    return "\n".join(o)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.exists(path) and open(path).read() == text:
        return
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    t = load_table(argv[1])
    out = argv[2]
    write(os.path.join(out, "include/kiln/ops.hpp"), ops_hpp(t))
    write(os.path.join(out, "include/kiln/kiln_ops.h"), kiln_ops_h(t))
    write(os.path.join(out, "loader/ops.cpp"), ops_cpp(t))
    write(os.path.join(out, "loader/c_ops.cpp"), c_ops_cpp(t))
    write(os.path.join(out, "python/ops_bindings.cpp"), bindings_cpp(t))
    write(os.path.join(out, "python/kiln/ops.py"), ops_py(t))
    write(os.path.join(out, "python/kiln/torch_ops.py"), torch_ops_py(t))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
