/* datasets/common.h -- how the datasets library (ds_) reports errors.
 *
 * The contract of every tapegrad library (autograd/ag_base.h): a fallible ds_ function returns
 * an int, 0 on success and -1 on failure (or NULL where it returns a pointer), and on failure
 * leaves a one-line message in the one error store, read with ag_last_error(). Messages name
 * what was wrong and where, so that a caller (and a test) can tell the failures apart:
 *   - bad data:      "path:LINE:COL: invalid UTF-8 byte 0xC3", "path: empty file", ...;
 *   - I/O:           "path: cannot open: <strerror>", "path: read failed: <strerror>";
 *   - bad arguments: the argument and its value ("ds_batches_new: batch_size = -1, ...");
 *   - memory:        "out of memory ..." (also for a size limit exceeded).
 * Queries that answer a question are not errors: ds_batches_next and ds_loader_next return a
 * bool (is there a next batch), lookups return -1 or NULL for "not found" where their header
 * says so.
 *
 * The library never prints, never calls exit() or abort() (but for TG_ASSERT on a broken
 * internal invariant, in debug builds). */
#ifndef TG_DS_COMMON_H
#define TG_DS_COMMON_H

#include "../autograd/ag_base.h"

#endif
