/*
 * `helper snapshot DIR`: the repository's files where the image has no git (SPEC
 * §21, git-free snapshots), read by crates/sandbox/src/worker/files.rs. Included by
 * bridge.c: one static helper, two uses.
 *
 * Prints
 *     total COUNT DIGEST
 *     HASH SIZE PATH        (one line per entry, at most MAX_LISTED)
 * where HASH is the FNV-1a 64 of a regular file's bytes (of a link's target for a
 * link; of its type for anything else), PATH is relative to DIR with `\`, newline
 * and carriage return escaped, and DIGEST sums a hash of every entry's path, hash
 * and size (the order directories list them in does not change it), so two trees
 * compare equal by their total line even when the list was cut.
 *
 * `.git` (anywhere) and `.agent-runner` (at the top) are skipped. Nothing is
 * followed: links are read, not opened; only regular files are opened (O_NOFOLLOW,
 * O_NONBLOCK: a FIFO the worker left cannot block it), and files above HASHED_MAX
 * bytes are known by size and modification time (a 2 GiB build artefact is not
 * read at every run). FNV rather than a cryptographic hash: the only one who could
 * gain from a collision is the worker, and it would only make its own change
 * invisible to the no-progress stop, which then stops its task sooner.
 */
#include <dirent.h>

#define MAX_LISTED 10000
#define MAX_DEPTH 64
#define HASHED_MAX (256L << 20)

typedef unsigned long long u64;

static const u64 FNV_OFFSET = 1469598103934665603ULL, FNV_PRIME = 1099511628211ULL;

static u64 fnv(u64 h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= FNV_PRIME;
    }
    return h;
}

static u64 snap_count, snap_digest;
static char snap_buf[1 << 16];

static void print_escaped(const char *s)
{
    for (; *s; s++) {
        if (*s == '\\')
            fputs("\\\\", stdout);
        else if (*s == '\n')
            fputs("\\n", stdout);
        else if (*s == '\r')
            fputs("\\r", stdout);
        else
            putchar(*s);
    }
}

static u64 hash_file(int dir, const char *name, const struct stat *st)
{
    u64 h = FNV_OFFSET;
    if (st->st_size > HASHED_MAX) {
        h = fnv(h, "big", 3);
        return fnv(h, &st->st_mtim, sizeof st->st_mtim);
    }
    int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat now;
    if (fd < 0 || fstat(fd, &now) != 0 || !S_ISREG(now.st_mode)) {
        if (fd >= 0)
            close(fd);
        return fnv(h, "unreadable", 10);
    }
    ssize_t r;
    while ((r = read(fd, snap_buf, sizeof snap_buf)) > 0)
        h = fnv(h, snap_buf, (size_t)r);
    if (r < 0)
        h = fnv(h, "unreadable", 10);
    close(fd);
    return h;
}

static void entry(const char *path, u64 hash, long long size)
{
    u64 e = fnv(FNV_OFFSET, path, strlen(path) + 1);
    e = fnv(e, &hash, sizeof hash);
    e = fnv(e, &size, sizeof size);
    snap_digest += e;
    if (snap_count++ < MAX_LISTED) {
        printf("%016llx %lld ", hash, size);
        print_escaped(path);
        putchar('\n');
    }
}

/* Walks the directory open as `dir` (closed here), `prefix` its path ("" at the top). */
static void walk(int dir, const char *prefix, int depth)
{
    DIR *d = fdopendir(dir);
    if (!d) {
        close(dir);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        const char *name = de->d_name;
        if (!strcmp(name, ".") || !strcmp(name, "..") || !strcmp(name, ".git"))
            continue;
        if (depth == 0 && !strcmp(name, ".agent-runner"))
            continue;
        size_t len = strlen(prefix) + strlen(name) + 2;
        char *path = malloc(len);
        if (!path)
            break;
        snprintf(path, len, "%s%s%s", prefix, *prefix ? "/" : "", name);
        struct stat st;
        if (fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            entry(path, fnv(FNV_OFFSET, "gone", 4), -1);
        } else if (S_ISDIR(st.st_mode)) {
            int sub = depth < MAX_DEPTH
                ? openat(dirfd(d), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                : -1;
            if (sub >= 0)
                walk(sub, path, depth + 1);
            else
                entry(path, fnv(FNV_OFFSET, "directory", 9), -1);
        } else if (S_ISREG(st.st_mode)) {
            entry(path, hash_file(dirfd(d), name, &st), (long long)st.st_size);
        } else if (S_ISLNK(st.st_mode)) {
            char target[4096];
            ssize_t n = readlinkat(dirfd(d), name, target, sizeof target);
            u64 h = fnv(FNV_OFFSET, "link", 4);
            entry(path, n < 0 ? h : fnv(h, target, (size_t)n), (long long)st.st_size);
        } else {
            unsigned type = (unsigned)(st.st_mode & S_IFMT);
            entry(path, fnv(FNV_OFFSET, &type, sizeof type), 0);
        }
        free(path);
    }
    closedir(d);
}

static int snapshot(const char *root)
{
    static char out[1 << 16];
    setvbuf(stdout, out, _IOFBF, sizeof out);
    int dir = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) {
        fprintf(stderr, "agent-runner helper: %s: %s\n", root, strerror(errno));
        return 1;
    }
    walk(dir, "", 0);
    printf("total %llu %016llx\n", snap_count, snap_digest);
    return fflush(stdout) == 0 ? 0 : 1;
}
