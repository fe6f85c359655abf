/* ag_file.h -- writing an output file atomically (the `ag_base` library, shared by every
 * library of tapegrad: checkpoints, vocabularies, exports, plots).
 *
 *     ag_file af;
 *     FILE *f = ag_file_open(&af, "model.safetensors");
 *     if (!f) return -1;                         // message in ag_last_error()
 *     fwrite(..., f); fprintf(f, ...);           // write as to any stream; never fclose(f)
 *     if (failed_somewhere) { ag_file_abort(&af); return -1; }
 *     return ag_file_commit(&af);                // 0, or -1 (the target is left as it was)
 *
 * What it guarantees:
 *   - Readers see the old file or the new one, never a part: the data go to a temporary file in
 *     the target's directory, which ag_file_commit flushes, fsyncs, rename()s over the target,
 *     then fsyncs the directory (best effort: some file systems refuse a directory fsync).
 *     A failure at any step, or ag_file_abort, removes the temporary file and leaves the target
 *     untouched.
 *   - A symlink stays a symlink: when path is a symbolic link (a chain of them, up to 40), the
 *     file written and renamed over is the link's final target, resolved the way open() would
 *     (a relative link is relative to the link's directory; a dangling link creates its
 *     target).
 *   - Permissions are kept: when the target exists its permission bits (st_mode & 07777) are
 *     copied to the new file, and its owner and group when the process may set them (best
 *     effort); a new file gets 0666 & ~umask, as fopen() would give it.
 *   - Temporaries can be found and do not pile up: the temporary file is
 *         <dir>/.<name>.tmp.<pid>.<6 random characters [A-Za-z0-9]>
 *     (<name> cut to its first 200 bytes). Every ag_file_open first removes the temporaries of
 *     the same <dir>/.<name> whose <pid> is another process that no longer exists
 *     (kill(pid, 0) fails with ESRCH): leftovers of a writer that was killed mid-save. A live
 *     writer's temporary (this process's, another one's) is never touched. Pids are per host
 *     and per pid namespace: two hosts (or containers) saving the same file on a shared
 *     directory can remove each other's live temporary, and that save then fails cleanly.
 *   - Named temporaries, not O_TMPFILE + linkat: linkat() cannot replace an existing file, so
 *     a named temporary and a rename would be needed anyway.
 *   - A target that exists and is not a regular file nor a directory (a FIFO, /dev/stdout, a
 *     terminal) is written directly, without a temporary: there is nothing to replace. A
 *     directory is refused.
 *
 * Errors go through the one channel (ag_error): every message names the path (and the
 * resolved target when it differs) and strerror(errno). Not thread-safe for one ag_file;
 * distinct ag_files may be used from distinct threads. */
#ifndef TG_AG_FILE_H
#define TG_AG_FILE_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One file being written. Fields are read-only for the caller; all are NULL when the ag_file
 * is not open (after commit, abort, or a failed open). */
typedef struct ag_file {
    FILE *fp;     /* the stream ag_file_open returned; owned: commit / abort close it */
    char *path;   /* the path given to ag_file_open (for messages); owned */
    char *target; /* the file replaced on commit: path with its symlinks followed; owned */
    char *tmp;    /* the temporary file, or NULL when the target is written directly; owned */
} ag_file;

/* Opens a temporary file to write `path` through, after removing stale temporaries of the
 * same target. Returns the stream to write (binary, fully buffered; owned by f: do not fclose
 * it), or NULL with a message (f is then left closed and needs no abort). */
FILE *ag_file_open(ag_file *f, const char *path);
/* Flushes, fsyncs and closes the stream, renames the temporary file over the target and
 * fsyncs its directory. Returns 0, or -1 when a write, the flush, the fsync, the close or the
 * rename failed: the temporary is then removed, the target untouched, and the message ends
 * with "(previous file kept)". f is closed in both cases. */
int ag_file_commit(ag_file *f);
/* Commits n files as one: each is flushed, fsynced and closed first, and only when all of them
 * were written are the temporaries renamed over their targets, so a full disk or a write error
 * leaves every target as it was (none is replaced). The renames themselves run one after the
 * other: a rename that fails after another succeeded (rare: it needs no space) leaves the ones
 * before it replaced. Returns 0 or -1 with the first failure's message; every f is closed. */
int ag_file_commit_all(ag_file *fs, int n);
/* Closes the stream and removes the temporary file: the target stays as it was (a target
 * written directly, a FIFO or a device, has had what was written). A no-op on a closed
 * ag_file (so it is safe on every cleanup path). Records no error. */
void ag_file_abort(ag_file *f);

#ifdef __cplusplus
}
#endif

#endif
