#ifndef KILN_EXPORT_H
#define KILN_EXPORT_H
/* KILN_API marks libkiln's documented API (C and C++). libkiln is built with hidden visibility
 * and a version script (loader/libkiln.map), so only what carries KILN_API is a dynamic symbol
 * of libkiln.so: every internal, and every nlohmann, curl or OpenSSL instantiation, stays
 * private to the library (docs/decisions.md, "A private core and a lean public libkiln"). */
#if defined(__GNUC__) || defined(__clang__)
#define KILN_API __attribute__((visibility("default")))
#else
#define KILN_API
#endif

#endif /* KILN_EXPORT_H */
