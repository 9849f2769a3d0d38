/* acme-kernels: the package description kiln_add_kernel_package generates (CMakeLists.txt),
 * defined in libacme-kernels. Hand it to kiln::Loader or kiln_loader_create. */
#ifndef ACME_KERNELS_H
#define ACME_KERNELS_H

#include <kiln/package.h>

#ifdef __cplusplus
extern "C" {
#endif

const kiln_package* acme_kernels_package(void);

#ifdef __cplusplus
}
#endif

#endif
