#define _GNU_SOURCE
/* datadir.c - the clone's data files: what its file syscalls (open, pread, pwrite, sendfile,
 * fdatasync) operate on. They are created and filled at start, so the per-request calls hit the
 * page cache the way a warmed original's do, and no request ever has to create or extend one. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ditto_internal.h"

/* Writes `len` bytes of the repeating pattern, then the memcached trailer in the last bytes:
 * a memcached-framed response can then end with a sendfile of the file's tail and need no
 * further send call for its "\r\nEND\r\n" (see docs/runtime.md). */
static int fill_file(int fd, uint64_t len, const uint8_t *pattern, size_t pattern_len)
{
    uint64_t done = 0;
    while (done < len) {
        size_t chunk = pattern_len;
        if (chunk > len - done)
            chunk = (size_t)(len - done);
        ssize_t n = pwrite(fd, pattern, chunk, (off_t)done);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        done += (uint64_t)n;
    }
    if (len >= DITTO_MEMCACHED_TRAILER_LEN) {
        off_t at = (off_t)(len - DITTO_MEMCACHED_TRAILER_LEN);
        if (pwrite(fd, DITTO_MEMCACHED_TRAILER, DITTO_MEMCACHED_TRAILER_LEN, at) !=
            DITTO_MEMCACHED_TRAILER_LEN)
            return -1;
    }
    return 0;
}

int ditto_datadir_create(struct ditto_datadir *dd, const char *requested, const char *clone_name,
                         uint32_t nfiles, uint64_t file_bytes, const uint8_t *pattern,
                         size_t pattern_len)
{
    memset(dd, 0, sizeof *dd);
    dd->dir_fd = -1;
    if (requested != NULL) {
        snprintf(dd->path, sizeof dd->path, "%s", requested);
        if (mkdir(dd->path, 0700) == 0) {
            dd->created_dir = 1;
        } else if (errno != EEXIST) {
            ditto_warn("cannot create data dir %s: %s (pass an existing or creatable --data-dir)",
                       dd->path, strerror(errno));
            return -1;
        }
    } else {
        /* The name says which clone left it, should a crash ever leave one behind. */
        char name[64];
        snprintf(name, sizeof name, "%s", clone_name != NULL ? clone_name : "clone");
        for (char *p = name; *p; p++)
            if (*p == '/' || *p == ' ')
                *p = '_';
        snprintf(dd->path, sizeof dd->path, "/tmp/ditto-%s-XXXXXX", name);
        if (mkdtemp(dd->path) == NULL) {
            ditto_warn("cannot create a data dir under /tmp: %s (pass --data-dir DIR)",
                       strerror(errno));
            return -1;
        }
        dd->created_dir = 1;
    }
    dd->dir_fd = open(dd->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dd->dir_fd < 0) {
        ditto_warn("cannot open data dir %s: %s", dd->path, strerror(errno));
        return -1;
    }
    dd->file_bytes = file_bytes;
    if (nfiles == 0)
        return 0;
    dd->fds = malloc(sizeof *dd->fds * nfiles);
    dd->names = malloc(sizeof *dd->names * nfiles);
    if (dd->fds == NULL || dd->names == NULL) {
        ditto_warn("out of memory for %u data files", nfiles);
        return -1;
    }
    for (uint32_t i = 0; i < nfiles; i++) {
        snprintf(dd->names[i], sizeof dd->names[i], "data-%05u", i);
        int fd = openat(dd->dir_fd, dd->names[i], O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0) {
            ditto_warn("cannot create %s/%s: %s", dd->path, dd->names[i], strerror(errno));
            return -1;
        }
        dd->fds[i] = fd;
        dd->nfiles = i + 1;
        if (fill_file(fd, file_bytes, pattern, pattern_len) != 0) {
            ditto_warn("cannot write %s/%s: %s (is the disk full? use --data-dir elsewhere)",
                       dd->path, dd->names[i], strerror(errno));
            return -1;
        }
    }
    return 0;
}

void ditto_datadir_destroy(struct ditto_datadir *dd, int remove)
{
    for (uint32_t i = 0; i < dd->nfiles; i++) {
        close(dd->fds[i]);
        if (remove)
            unlinkat(dd->dir_fd, dd->names[i], 0);
    }
    if (dd->dir_fd >= 0)
        close(dd->dir_fd);
    if (remove && dd->created_dir && dd->path[0] != '\0')
        rmdir(dd->path);
    free(dd->fds);
    free(dd->names);
    dd->fds = NULL;
    dd->names = NULL;
    dd->nfiles = 0;
    dd->dir_fd = -1;
}
