#pragma once
// Every specialisation of the embedded registry as a compiled-in table, made at build time by
// registry/table_gen.cpp from the same embedded registry and sources that embedded_registry()
// parses and hashes at run time (so the values are equal; EmbeddedSpec.* compares every URI).
// The loader's cold path reads it instead of parsing kernels.json and hashing sources: what a
// fresh process pays before its first kernel (docs/performance.md).
#include <cstddef>

namespace kiln::embedded {

struct SpecRow {
  const char* uri;
  const char* family;
  const char* const* params;  // key, value, key, value... in registry order
  std::size_t param_pairs;
  const char* const* entries;
  std::size_t entry_count;
  const char* source_hash;
};

// Sorted by uri (strcmp order).
const SpecRow* spec_rows();
std::size_t spec_row_count();

}  // namespace kiln::embedded
