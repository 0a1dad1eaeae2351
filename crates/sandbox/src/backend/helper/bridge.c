/*
 * agent-runner's egress bridge (SPEC §17), built static by build.rs and mounted
 * read-only into the task's container, which has no network (`--network none`).
 *
 * It is the container's entrypoint and keep-alive: it prepares the agent's home (as
 * the shell keep-alive of the other network modes does: for each MOUNT LINK pair,
 * LINK's directory under HOME created, and LINK made a link to the host's login
 * file at MOUNT when it is mounted), listens on
 * 127.0.0.1:PORT, prints "agent-runner-ready <pid>" once it does (and the locality
 * token, below), carries every
 * connection to the proxy's unix socket SOCKET (agent-runner's, on the host; the
 * proxy decides what is allowed), and exits when its stdin (agent-runner's pipe)
 * reaches end-of-file, which ends the container.
 *
 * Why C, static, one process, one poll loop: it needs nothing from the image (no
 * shell tools, no libc of the image's), the envelope spares only the keep-alive's
 * pid between runs (a forked child would be stopped), and its memory is bounded
 * (MAX_PAIRS connections). Bytes move with splice(2) through a pipe per direction,
 * inside the kernel; where the kernel cannot splice (unix sockets before Linux
 * 4.2), through a buffer. It trusts nothing it reads: it only moves bytes.
 *
 * Usage: bridge [token=FILE] [control=SOCKET] [find=PROGRAM] PORT SOCKET [MOUNT LINK]...
 * PORT 0 (SOCKET unused): no egress, the keep-alive alone. With token=FILE, the
 * hex digits FILE starts with follow the pid in the ready line ("-" if none): the
 * locality proof of a bind-mounted repository (locality.rs). With find=PROGRAM, the
 * line ends in "program=found" when the image's /bin/sh would find PROGRAM (the
 * test command's program, SPEC §21's preflight) for certain, else in
 * "program=unknown", and agent-runner asks the shell itself: an exec saved on
 * every start where the answer is yes.
 *
 * It is the container's PID 1 (init.c): non-dumpable, and it reaps orphans. A line
 * "quiet" stops every other process of the sandbox (quiet.c). With control=SOCKET
 * the line comes on agent-runner's unix socket SOCKET, connected before the ready
 * line, which then is also its stdout (the answer goes there); stdin is only
 * watched for its end. Else the line comes on stdin.
 *
 * Why a socket: under gVisor (runsc) the non-dumpable flag does not close
 * /proc/1/fd/N, and a pipe PID 1 holds there can be opened again by the worker,
 * which could then write a forged answer on it, or read the request away. A socket
 * cannot be opened through /proc (ENXIO, under runc and runsc alike).
 *
 * It is also agent-runner's static helper in the tools volume (SPEC §21), where its
 * second use is `helper snapshot DIR` (snapshot.c): the repository's files, for images
 * without git; its third `helper lifeline ...` (lifeline.c): the sandbox's main
 * process when agent-runner's stream to it carries egress and files (SPEC §22).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "snapshot.c"

/* More than the proxy's own limit, so that the proxy (which answers why) refuses. */
#define MAX_PAIRS 128
/* The buffer of the fallback. */
#define CHUNK 65536

/* Bytes taken from one side, waiting to be given to the other: in a pipe, or in
 * `buf` when splicing is not possible. */
struct half {
    int pipe[2];  /* -1 when not in use */
    char *buf;
    size_t cap, len, off;
    int eof;      /* the reading side has ended */
    int shut;     /* and the writing side was told (SHUT_WR), or cannot be written */
};

/* One connection: fd[0] the client's TCP socket, fd[1] the proxy's unix socket;
 * h[i] holds what was taken from fd[i], for fd[1 - i]. */
struct pair {
    int used;
    int fd[2];
    struct half h[2];
};

static struct pair pairs[MAX_PAIRS];

static void die(const char *what)
{
    fprintf(stderr, "agent-runner egress bridge: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void close_half(struct half *h)
{
    for (int i = 0; i < 2; i++) {
        if (h->pipe[i] >= 0)
            close(h->pipe[i]);
        h->pipe[i] = -1;
    }
    free(h->buf);
    h->buf = NULL;
}

static void close_pair(struct pair *p)
{
    for (int i = 0; i < 2; i++) {
        close(p->fd[i]);
        close_half(&p->h[i]);
    }
    memset(p, 0, sizeof *p);
}

/* A pipe for a direction, or a buffer if there can be no pipe; -1 if neither. */
static int open_half(struct half *h)
{
    memset(h, 0, sizeof *h);
    h->pipe[0] = h->pipe[1] = -1;
    if (pipe2(h->pipe, O_CLOEXEC | O_NONBLOCK) == 0) {
        int cap = fcntl(h->pipe[1], F_GETPIPE_SZ);
        h->cap = cap > 0 ? (size_t)cap : 4096;
        return 0;
    }
    h->pipe[0] = h->pipe[1] = -1;
    h->cap = CHUNK;
    return (h->buf = malloc(CHUNK)) ? 0 : -1;
}

/* `$HOME/link`'s directory, created with its parents (codex exits without its
 * home), and `$HOME/link` a link to `mount` if that exists. */
static void prepare_home(const char *mount, const char *link)
{
    char path[4096];
    const char *h = getenv("HOME");
    if (snprintf(path, sizeof path, "%s/%s", h ? h : "", link) >= (int)sizeof path)
        die("the agent's home path is too long");
    char *last = strrchr(path, '/');
    for (char *p = path + 1; p && p <= last; p++) {
        if (*p == '/') {
            *p = 0;
            if (mkdir(path, 0755) != 0 && errno != EEXIST && p == last)
                die("cannot create the agent's home");
            *p = '/';
        }
    }
    if (access(mount, F_OK) == 0) {
        unlink(path);
        if (symlink(mount, path) != 0)
            die("cannot link the login file");
    }
}

#include "exec.c"
#include "init.c"
#include "quiet.c"
#include "find.c"
#include "lifeline.c"

static int proxy_socket(const char *path)
{
    struct sockaddr_un addr;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    strncpy(addr.sun_path, path, sizeof addr.sun_path - 1);
    /* Blocking: a unix connect completes at once while the proxy accepts. */
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void accept_one(int listener, const char *path)
{
    int one = 1, slot, client = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
    if (client < 0)
        return;
    for (slot = 0; slot < MAX_PAIRS && pairs[slot].used; slot++)
        ;
    int upstream = slot < MAX_PAIRS ? proxy_socket(path) : -1;
    if (upstream < 0) {
        close(client);
        return;
    }
    struct pair *p = &pairs[slot];
    p->fd[0] = client;
    p->fd[1] = upstream;
    int ok = open_half(&p->h[0]) == 0;
    ok = open_half(&p->h[1]) == 0 && ok;
    if (!ok) {
        close_pair(p);
        return;
    }
    p->used = 1;
    setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    /* Non-blocking from here: a slow side must not hold the others. */
    for (int i = 0; i < 2; i++)
        fcntl(p->fd[i], F_SETFL, fcntl(p->fd[i], F_GETFL) | O_NONBLOCK);
}

/* Takes what `from` has into `h`: >0 bytes, 0 at its end, -1 for nothing now. */
static ssize_t take(struct half *h, int from)
{
    ssize_t n;
    if (h->buf) {
        n = read(from, h->buf, CHUNK);
    } else {
        n = splice(from, NULL, h->pipe[1], NULL, h->cap - h->len, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n < 0 && errno == EINVAL && h->len == 0) {
            /* This kernel cannot splice from this socket: a buffer instead. */
            char *buf = malloc(CHUNK);
            if (!buf)
                return 0;
            close_half(h);
            h->buf = buf;
            h->cap = CHUNK;
            n = read(from, h->buf, CHUNK);
        }
    }
    if (n > 0) {
        if (h->buf)
            h->off = 0;
        h->len += (size_t)n;
        return n;
    }
    if (n == 0 || (errno != EAGAIN && errno != EINTR))
        return 0;
    return -1;
}

/* Gives what `h` holds to `to`: 0 done or nothing now, -1 when `to` is broken. */
static int give(struct half *h, int to)
{
    ssize_t n = h->buf ? send(to, h->buf + h->off, h->len, MSG_NOSIGNAL)
                       : splice(h->pipe[0], NULL, to, NULL, h->len, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n > 0) {
        h->off += (size_t)n;
        h->len -= (size_t)n;
        return 0;
    }
    return n < 0 && errno != EAGAIN && errno != EINTR ? -1 : 0;
}

/* Whether `h` can take more now. */
static int room(const struct half *h)
{
    return !h->eof && (h->buf ? h->len == 0 : h->len < h->cap);
}

/* Moves what it can in one direction, given what poll said of both sockets. A
 * side that cannot be read any more ends this direction (passed on as a
 * half-close); one that cannot be written drops it. Either way the other
 * direction still delivers what it holds (a refusal from the proxy, say), and the
 * pair closes once both are done. */
static void pump(struct pair *p, int from, short seen_from, short seen_to)
{
    struct half *h = &p->h[from];
    int to = 1 - from;
    if (room(h) && (seen_from & (POLLIN | POLLHUP | POLLERR)) && take(h, p->fd[from]) == 0)
        h->eof = 1;
    int broken = h->len > 0 && (seen_to & (POLLOUT | POLLERR)) && give(h, p->fd[to]) != 0;
    /* A hung-up socket can be written no more (and poll would keep saying so). */
    if (broken || (!h->shut && (seen_to & (POLLHUP | POLLERR)))) {
        h->len = 0;
        h->eof = h->shut = 1;
        shutdown(p->fd[from], SHUT_RD);
    }
    if (h->eof && h->len == 0 && !h->shut) {
        shutdown(p->fd[to], SHUT_WR);
        h->shut = 1;
    }
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "snapshot") == 0)
        return snapshot(argv[2]);
    if (argc >= 2 && strcmp(argv[1], "lifeline") == 0)
        return lifeline(argc, argv);
    /* The locality token (locality.rs): read before anything else runs, and said
     * in the ready line; "-" when it cannot be read. Only hex digits are said. */
    char token[65] = "-";
    int proving = 0;
    if (argc >= 2 && strncmp(argv[1], "token=", 6) == 0) {
        int fd = open(argv[1] + 6, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd >= 0) {
            ssize_t r = read(fd, token, sizeof token - 1);
            size_t n = 0;
            while (r > 0 && n < (size_t)r && ((token[n] >= '0' && token[n] <= '9') || (token[n] >= 'a' && token[n] <= 'f')))
                n++;
            token[n] = 0;
            if (n == 0)
                strcpy(token, "-");
            close(fd);
        }
        proving = 1;
        argv++;
        argc--;
    }
    const char *control = NULL;
    if (argc >= 2 && strncmp(argv[1], "control=", 8) == 0) {
        control = argv[1] + 8;
        argv++;
        argc--;
    }
    const char *find = NULL;
    if (argc >= 2 && strncmp(argv[1], "find=", 5) == 0) {
        find = argv[1] + 5;
        argv++;
        argc--;
    }
    if (argc < 3 || argc % 2 == 0) {
        fprintf(stderr, "usage: %s [token=FILE] [control=SOCKET] [find=PROGRAM] PORT SOCKET [MOUNT LINK]...\n", argv[0]);
        return 2;
    }
    int port = atoi(argv[1]), one = 1;
    const char *path = argv[2];
    if (port < 0 || port > 65535 || strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path) ||
        (control && strlen(control) >= sizeof(((struct sockaddr_un *)0)->sun_path))) {
        fprintf(stderr, "agent-runner egress bridge: bad arguments\n");
        return 2;
    }
    become_init();
    signal(SIGPIPE, SIG_IGN);
    for (int i = 3; i + 1 < argc; i += 2)
        prepare_home(argv[i], argv[i + 1]);
    /* With the image's PATH, before it is forgotten. */
    const char *found = !find ? "" : finds(find) ? " program=found" : " program=unknown";
    if (control)
        keep_environment();
    forget_environment();
    int listener = port == 0 ? -1 : socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (port > 0 && listener < 0)
        die("socket");
    if (port > 0) {
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        struct sockaddr_in addr;
        memset(&addr, 0, sizeof addr);
        addr.sin_family = AF_INET;
        addr.sin_port = htons((unsigned short)port);
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (bind(listener, (struct sockaddr *)&addr, sizeof addr) != 0)
            die("cannot listen on 127.0.0.1");
        if (listen(listener, 128) != 0)
            die("listen");
    }
    char ready[160];
    int len = proving ? snprintf(ready, sizeof ready, "agent-runner-ready %d %s%s\n", (int)getpid(), token, found)
                      : snprintf(ready, sizeof ready, "agent-runner-ready %d%s\n", (int)getpid(), found);
    /* Connected before the ready line: no process of the worker runs before it. */
    int requests = 0;
    if (control) {
        requests = proxy_socket(control);
        if (requests < 0)
            die("cannot connect to agent-runner's control socket");
    }
    if (write(1, ready, (size_t)len) != len)
        die("stdout");
    if (control) {
        /* The pipe of stdout is let go: the answers go on the socket. */
        if (dup2(requests, 1) != 1)
            die("dup2");
        close(requests);
        requests = 1;
    }

    /* stdin, the requests' socket, the listener, then two entries per pair in use. */
    enum { FIXED = 3 };
    static struct pollfd fds[FIXED + 2 * MAX_PAIRS];
    static int owner[FIXED + 2 * MAX_PAIRS];
    char drain[512], line[32];
    size_t line_len = 0;
    /* Descriptors passed with the requests (exec.c), until an "exec" takes them. */
    int passed[4], npassed = 0;
    for (;;) {
        int n = 0;
        fds[n++] = (struct pollfd){.fd = 0, .events = POLLIN};
        fds[n++] = (struct pollfd){.fd = control ? requests : -1, .events = POLLIN};
        fds[n++] = (struct pollfd){.fd = listener, .events = POLLIN};
        for (int s = 0; s < MAX_PAIRS; s++) {
            struct pair *p = &pairs[s];
            if (!p->used)
                continue;
            for (int i = 0; i < 2; i++) {
                short events = 0;
                if (room(&p->h[i]))
                    events |= POLLIN;
                if (p->h[1 - i].len > 0)
                    events |= POLLOUT;
                owner[n] = s;
                fds[n++] = (struct pollfd){.fd = p->fd[i], .events = events};
            }
        }
        if (poll(fds, (nfds_t)n, -1) < 0) {
            if (errno == EINTR)
                continue;
            die("poll");
        }
        if (control && fds[0].revents) {
            /* Only its end counts: what else comes on it is not agent-runner's. */
            ssize_t r = read(0, drain, sizeof drain);
            if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN))
                return 0;
        }
        int from = control ? requests : 0;
        if (fds[control ? 1 : 0].revents) {
            ssize_t r = control ? receive(from, drain, sizeof drain, passed, &npassed) : read(from, drain, sizeof drain);
            if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN))
                return 0;
            /* Lines of agent-runner's; a longer one is none of ours. */
            for (ssize_t i = 0; i < r; i++) {
                if (drain[i] != '\n') {
                    if (line_len < sizeof line)
                        line[line_len] = drain[i];
                    line_len++;
                    continue;
                }
                if (control && line_len < sizeof line && line_len > 5 && memcmp(line, "exec ", 5) == 0) {
                    line[line_len] = 0;
                    char answer[64];
                    int len = exec_request(from, atol(line + 5), drain + i + 1, (size_t)(r - i - 1), passed, &npassed,
                                           answer, sizeof answer);
                    explicit_bzero(drain, sizeof drain);
                    /* The request's bytes after the line were its own. */
                    r = i + 1;
                    if (len <= 0 || write(1, answer, (size_t)len) != len)
                        die("stdout");
                } else if (control && line_len < sizeof line && line_len > 7 && memcmp(line, "signal ", 7) == 0) {
                    line[line_len] = 0;
                    exec_signal(line);
                } else if (line_len == 5 && memcmp(line, "quiet", 5) == 0) {
                    char answer[64], counts[32];
                    quiet(counts, sizeof counts);
                    int len = snprintf(answer, sizeof answer, "agent-runner-quiet %s\n", counts);
                    if (write(1, answer, (size_t)len) != len)
                        die("stdout");
                }
                line_len = 0;
            }
        }
        for (int k = FIXED; k < n; k += 2) {
            struct pair *p = &pairs[owner[k]];
            short r0 = fds[k].revents, r1 = fds[k + 1].revents;
            pump(p, 0, r0, r1);
            pump(p, 1, r1, r0);
            if (p->h[0].shut && p->h[1].shut)
                close_pair(p);
        }
        if (fds[2].revents & POLLIN)
            accept_one(listener, path);
    }
}
