/* datasets/common.h -- status codes and the error message of the datasets library (ds_).
 *
 * Every fallible ds_ function returns an int status: DS_OK (0) on success, one of the
 * nonzero ds_status codes below on failure. On failure it also leaves a one-line message
 * in the thread-local error channel, read with ag_last_error(). Messages name what was wrong and
 * where: "path:LINE:COL: invalid UTF-8 byte 0xC3 ..." for data errors, the path and
 * strerror() for I/O errors, the argument and its value for bad arguments.
 *
 * The library never prints, never calls exit() or abort(). */
#ifndef TG_DS_COMMON_H
#define TG_DS_COMMON_H

typedef enum {
    DS_OK = 0,
    DS_EARG = 1,    /* user error: an argument is out of range or NULL            */
    DS_EIO = 2,     /* environment: file missing, unreadable, unwritable           */
    DS_EFORMAT = 3, /* bad data: invalid UTF-8, NUL byte, no sentence pair, ...    */
    DS_ENOMEM = 4,  /* environment: allocation failed or a size limit was exceeded */
} ds_status;

/* The message of a failed ds_ call is read with ag_last_error() (autograd/ag_base.h): the one
 * error channel of every tapegrad library. */
#include "../autograd/ag_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Short name of a status code ("ok", "bad argument", "I/O error", "bad data",
 * "out of memory"); "unknown status" for anything else. Static string. */
const char *ds_status_name(int status);

#ifdef __cplusplus
}
#endif

#endif
