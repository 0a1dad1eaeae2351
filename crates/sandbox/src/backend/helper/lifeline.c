/*
 * The lifeline (SPEC §22): the sandbox's main process, PID 1 (init.c: non-dumpable,
 * reaping orphans, no engine's init above it), whose stdin and stdout are THE stream
 * between agent-runner and the sandbox. Nothing of the host is mounted: it runs from
 * the tools volume. backend/lifeline.rs is the other end.
 *
 * Usage: agent-runner-helper lifeline [find=PROGRAM] PORT EXPIRES [FILE LINK]...
 *   find=PROGRAM  the ready line ends in "program=found" or "program=unknown"
 *            (find.c).
 *   PORT     0: no egress; else listen on 127.0.0.1:PORT, each connection a channel.
 *   EXPIRES  unix seconds after which it exits (ending the sandbox); 0: never. So a
 *            sandbox whose agent-runner (or host link) is lost cannot run for ever.
 *   FILE LINK  LINK (under HOME) made a link to FILE, its directory created (codex
 *            exits without its home); FILE arrives by a FILE frame.
 * It prints "agent-runner-ready <pid>\n"; from then on both directions are frames.
 * It exits when its stdin ends (agent-runner closed the stream, or is gone), when
 * EXPIRES passes, or when the stream breaks the protocol.
 *
 * A frame: 8 bytes of header, then LENGTH bytes.
 *   byte 0 KIND, byte 1 zero, bytes 2-3 CHANNEL (big-endian, < LL_CHANNELS),
 *   bytes 4-7 LENGTH (big-endian, <= LL_MAX_DATA).
 * Kinds:
 *   OPEN   (up)   a connection was accepted on CHANNEL, which was free; empty.
 *   DATA   (both) the channel's bytes.
 *   EOF    (both) the sender's direction of the channel ended (a half-close); empty.
 *   CLOSE  (both) the sender is done with the channel and sends nothing more on it;
 *                 the receiver delivers what it holds of it, then answers CLOSE if
 *                 it has not sent one. A channel is free again once its side has
 *                 sent and received CLOSE. Empty.
 *   CREDIT (both) 4 bytes, big-endian N: N more bytes of DATA were delivered.
 *   FILE   (down) 2 bytes path length, the path, the content: written mode 0600.
 *   FILED  (up)   the answer to FILE: empty, or why it failed.
 *   QUIET  (down) stop every other process of the sandbox (quiet.c); empty.
 *   QUIETED (up)  the answer to QUIET: "FOUND LEFT", the processes found, and left.
 * Flow control: each direction of a channel starts with its window of credit
 * (LL_WINDOW_DOWN from agent-runner to here, LL_WINDOW_UP from here up); DATA spends
 * it, CREDIT returns it once the bytes left the receiver. So a slow connection holds
 * at most a window on either side and never stalls the others, and neither side's
 * memory grows without bound. The download direction's window is the larger: its
 * credits come back over the container's stdout, docker's slow direction, and a
 * direction moves at most a window per round trip.
 */

#define LL_OPEN 1
#define LL_DATA 2
#define LL_EOF 3
#define LL_CLOSE 4
#define LL_CREDIT 5
#define LL_FILE 6
#define LL_FILED 7
#define LL_QUIET 8
#define LL_QUIETED 9
#define LL_HEADER 8
#define LL_CHANNELS 128
#define LL_MAX_DATA 65536
#define LL_WINDOW_DOWN (4096 * 1024)
#define LL_WINDOW_UP (512 * 1024)
/* What one read of stdin may take (many frames at once). */
#define LL_DOWN_BUF (1024 * 1024)
/* Asked of the kernel for the stdio pipes: fewer wake-ups per megabyte. */
#define LL_PIPE (1024 * 1024)
/* What goes up waits here; a channel reads only while a whole frame fits, with room
 * left for the control frames of every channel. */
#define LL_UP (1024 * 1024)
#define LL_RESERVE (LL_CHANNELS * 4 * (LL_HEADER + 4))

#include <stdint.h>
#include <time.h>

struct chan {
    int state;          /* 0 free, 1 open */
    int fd;             /* the client's socket, -1 once closed */
    int rd_eof;         /* the client's input ended and EOF went up */
    int got_eof;        /* agent-runner's EOF came */
    int shut;           /* and the client was told (SHUT_WR) */
    int sent_close, got_close;
    char *out;          /* agent-runner's bytes for the client */
    size_t out_len, out_off;
    uint32_t credit;    /* bytes we may still send up */
    uint32_t owed;      /* bytes delivered to the client, not yet credited */
};

static struct chan chans[LL_CHANNELS];
static unsigned char up[LL_UP];
static size_t up_len, up_off;
static unsigned char down[LL_DOWN_BUF];
static size_t down_len;
/* The FILE LINK pairs of the command line. */
static int ll_argc;
static char **ll_argv;

static void ll_die(const char *what)
{
    fprintf(stderr, "agent-runner lifeline: %s\n", what);
    exit(3);
}

static size_t up_room(void)
{
    return LL_UP - up_len;
}

static void put_frame(int kind, int ch, const void *bytes, uint32_t len)
{
    if (up_room() < LL_HEADER + len)
        ll_die("internal: no room for a frame");
    if (up_off > 0 && up_off + up_len + LL_HEADER + len > LL_UP) {
        memmove(up, up + up_off, up_len);
        up_off = 0;
    }
    unsigned char *h = up + up_off + up_len;
    h[0] = (unsigned char)kind;
    h[1] = 0;
    h[2] = (unsigned char)(ch >> 8);
    h[3] = (unsigned char)ch;
    h[4] = (unsigned char)(len >> 24);
    h[5] = (unsigned char)(len >> 16);
    h[6] = (unsigned char)(len >> 8);
    h[7] = (unsigned char)len;
    if (len)
        memcpy(h + LL_HEADER, bytes, len);
    up_len += LL_HEADER + len;
}

static void put_credit(int ch, uint32_t n)
{
    unsigned char b[4] = {(unsigned char)(n >> 24), (unsigned char)(n >> 16), (unsigned char)(n >> 8),
                          (unsigned char)n};
    put_frame(LL_CREDIT, ch, b, 4);
}

static void chan_free(struct chan *c)
{
    if (c->fd >= 0)
        close(c->fd);
    free(c->out);
    memset(c, 0, sizeof *c);
    c->fd = -1;
}

/* We are done with the channel: CLOSE up (once); free once theirs came too. */
static void chan_close(int ch)
{
    struct chan *c = &chans[ch];
    if (c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
    }
    if (!c->sent_close) {
        put_frame(LL_CLOSE, ch, NULL, 0);
        c->sent_close = 1;
    }
    if (c->got_close)
        chan_free(c);
}

static void ll_accept(int listener)
{
    int one = 1, ch, fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0)
        return;
    for (ch = 0; ch < LL_CHANNELS && chans[ch].state; ch++)
        ;
    char *out = ch < LL_CHANNELS ? malloc(LL_WINDOW_DOWN) : NULL;
    /* No free channel: the client sees its connection closed. */
    if (!out || up_room() < LL_RESERVE) {
        free(out);
        close(fd);
        return;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct chan *c = &chans[ch];
    memset(c, 0, sizeof *c);
    c->state = 1;
    c->fd = fd;
    c->out = out;
    c->credit = LL_WINDOW_UP;
    put_frame(LL_OPEN, ch, NULL, 0);
}

/* A FILE frame: the path, then the content, written new with mode 0600. */
static void write_file(const unsigned char *p, uint32_t len)
{
    char path[4096], why[256] = "";
    uint32_t plen = len >= 2 ? ((uint32_t)p[0] << 8 | p[1]) : 0;
    if (plen == 0 || plen + 2 > len || plen >= sizeof path || p[2] != '/') {
        put_frame(LL_FILED, 0, "bad file frame", 14);
        return;
    }
    memcpy(path, p + 2, plen);
    path[plen] = 0;
    const unsigned char *data = p + 2 + plen;
    size_t n = len - 2 - plen;
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 || fchmod(fd, 0600) != 0) {
        snprintf(why, sizeof why, "cannot create %.160s: %s", path, strerror(errno));
    } else {
        while (n > 0) {
            ssize_t w = write(fd, data, n);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                snprintf(why, sizeof why, "cannot write %.160s: %s", path, strerror(errno));
                break;
            }
            data += w;
            n -= (size_t)w;
        }
    }
    if (fd >= 0)
        close(fd);
    for (int i = 4; !why[0] && i + 1 < ll_argc; i += 2)
        if (strcmp(ll_argv[i], path) == 0)
            prepare_home(ll_argv[i], ll_argv[i + 1]);
    put_frame(LL_FILED, 0, why, (uint32_t)strlen(why));
}

/* One frame from agent-runner. */
static void ll_frame(int kind, int ch, const unsigned char *p, uint32_t len)
{
    if (kind == LL_FILE) {
        write_file(p, len);
        return;
    }
    if (kind == LL_QUIET) {
        char counts[32];
        int n = quiet(counts, sizeof counts);
        put_frame(LL_QUIETED, 0, counts, (uint32_t)n);
        return;
    }
    if (ch >= LL_CHANNELS)
        ll_die("protocol error: a channel out of range");
    struct chan *c = &chans[ch];
    if (!c->state)
        return; /* freed here and not yet known there: nothing to do */
    switch (kind) {
    case LL_DATA:
        if (c->got_eof || c->out_len + len > LL_WINDOW_DOWN)
            ll_die("protocol error: data beyond the window");
        if (c->fd < 0) {
            c->owed += len;
            return;
        }
        if (c->out_len == 0) {
            /* Straight to the client; only what it cannot take now waits. */
            ssize_t w = send(c->fd, p, len, MSG_NOSIGNAL);
            if (w > 0) {
                p += w;
                len -= (uint32_t)w;
                c->owed += (uint32_t)w;
            }
            c->out_off = 0;
        }
        if (c->out_off + c->out_len + len > LL_WINDOW_DOWN) {
            memmove(c->out, c->out + c->out_off, c->out_len);
            c->out_off = 0;
        }
        memcpy(c->out + c->out_off + c->out_len, p, len);
        c->out_len += len;
        break;
    case LL_EOF:
        c->got_eof = 1;
        break;
    case LL_CLOSE:
        /* What it sent before is still delivered, then the channel closes. */
        c->got_close = c->got_eof = 1;
        if (c->out_len == 0 || c->fd < 0)
            chan_close(ch);
        break;
    case LL_CREDIT:
        if (len != 4)
            ll_die("protocol error: a bad credit");
        c->credit += (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        if (c->credit > LL_WINDOW_UP)
            ll_die("protocol error: credit beyond the window");
        break;
    default:
        ll_die("protocol error: an unknown frame");
    }
}

/* Reads what stdin has and handles every whole frame. */
static void ll_read_down(void)
{
    ssize_t n = read(0, down + down_len, sizeof down - down_len);
    if (n == 0)
        exit(0);
    if (n < 0) {
        if (errno == EAGAIN || errno == EINTR)
            return;
        exit(0);
    }
    down_len += (size_t)n;
    size_t at = 0;
    while (down_len - at >= LL_HEADER) {
        unsigned char *h = down + at;
        uint32_t len = (uint32_t)h[4] << 24 | (uint32_t)h[5] << 16 | (uint32_t)h[6] << 8 | h[7];
        if (len > LL_MAX_DATA)
            ll_die("protocol error: a frame too long");
        if (down_len - at < LL_HEADER + len)
            break;
        ll_frame(h[0], h[2] << 8 | h[3], h + LL_HEADER, len);
        at += LL_HEADER + len;
    }
    memmove(down, down + at, down_len - at);
    down_len -= at;
}

/* Moves what it can for channel `ch`, given what poll said of its socket. */
static void ll_pump(int ch, short seen)
{
    struct chan *c = &chans[ch];
    if (c->fd < 0)
        return;
    if (c->out_len > 0 && (seen & (POLLOUT | POLLERR | POLLHUP))) {
        ssize_t w = send(c->fd, c->out + c->out_off, c->out_len, MSG_NOSIGNAL);
        if (w > 0) {
            c->out_off += (size_t)w;
            c->out_len -= (size_t)w;
            c->owed += (uint32_t)w;
        } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
            chan_close(ch);
            return;
        }
    }
    if (c->out_len == 0)
        c->out_off = 0;
    if (c->got_close && c->out_len == 0) {
        chan_close(ch);
        return;
    }
    /* Credit by the quarter window, not per delivery: each CREDIT is a write up the
     * slow direction, and the sender still has three quarters in flight. */
    if (c->owed >= LL_WINDOW_DOWN / 4 && !c->got_eof) {
        if (up_room() >= LL_RESERVE / 2) {
            put_credit(ch, c->owed);
            c->owed = 0;
        }
    }
    if (c->got_eof && c->out_len == 0 && !c->shut) {
        shutdown(c->fd, SHUT_WR);
        c->shut = 1;
    }
    if (!c->rd_eof && c->credit > 0 && (seen & (POLLIN | POLLHUP | POLLERR)) &&
        up_room() >= LL_HEADER + LL_MAX_DATA + LL_RESERVE) {
        if (up_off + up_len + LL_HEADER + LL_MAX_DATA > LL_UP) {
            memmove(up, up + up_off, up_len);
            up_off = 0;
        }
        uint32_t want = c->credit < LL_MAX_DATA ? c->credit : LL_MAX_DATA;
        ssize_t r = recv(c->fd, up + up_off + up_len + LL_HEADER, want, 0);
        if (r > 0) {
            /* put_frame with the bytes already in place. */
            unsigned char *h = up + up_off + up_len;
            h[0] = LL_DATA;
            h[1] = 0;
            h[2] = (unsigned char)(ch >> 8);
            h[3] = (unsigned char)ch;
            h[4] = (unsigned char)((uint32_t)r >> 24);
            h[5] = (unsigned char)((uint32_t)r >> 16);
            h[6] = (unsigned char)((uint32_t)r >> 8);
            h[7] = (unsigned char)r;
            up_len += LL_HEADER + (size_t)r;
            c->credit -= (uint32_t)r;
        } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
            c->rd_eof = 1;
            put_frame(LL_EOF, ch, NULL, 0);
        }
    }
    if (c->rd_eof && c->shut)
        chan_close(ch);
}

static int lifeline(int argc, char **argv)
{
    const char *find = NULL;
    if (argc >= 3 && strncmp(argv[2], "find=", 5) == 0) {
        find = argv[2] + 5;
        /* The rest as if it were not there. */
        argv[2] = argv[1];
        argv[1] = argv[0];
        argv++;
        argc--;
    }
    if (argc < 4 || argc % 2 != 0) {
        fprintf(stderr, "usage: %s lifeline [find=PROGRAM] PORT EXPIRES [FILE LINK]...\n", argv[0]);
        return 2;
    }
    int port = atoi(argv[2]), one = 1, listener = -1;
    long long expires = atoll(argv[3]);
    if (port < 0 || port > 65535 || expires < 0) {
        fprintf(stderr, "agent-runner lifeline: bad arguments\n");
        return 2;
    }
    become_init();
    signal(SIGPIPE, SIG_IGN);
    for (int ch = 0; ch < LL_CHANNELS; ch++)
        chans[ch].fd = -1;
    /* A FILE that is there is linked now; one that comes by a FILE frame then. */
    ll_argc = argc;
    ll_argv = argv;
    for (int i = 4; i + 1 < argc; i += 2)
        prepare_home(argv[i], argv[i + 1]);
    if (port > 0) {
        listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (listener < 0)
            die("socket");
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
    char ready[96];
    int len = snprintf(ready, sizeof ready, "agent-runner-ready %d%s\n", (int)getpid(),
                       !find ? "" : finds(find) ? " program=found" : " program=unknown");
    if (write(1, ready, (size_t)len) != len)
        die("stdout");
    for (int fd = 0; fd < 2; fd++) {
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        fcntl(fd, F_SETPIPE_SZ, LL_PIPE); /* not a pipe, or refused: as it is */
    }

    static struct pollfd fds[3 + LL_CHANNELS];
    static int owner[3 + LL_CHANNELS];
    for (;;) {
        int n = 0, timeout = -1;
        if (expires > 0) {
            long long left = expires - (long long)time(NULL);
            if (left <= 0)
                ll_die("the sandbox expired (its expiry passed): ending it");
            timeout = left > 60 ? 60000 : (int)left * 1000;
        }
        fds[n++] = (struct pollfd){.fd = 0, .events = POLLIN};
        fds[n++] = (struct pollfd){.fd = 1, .events = up_len ? POLLOUT : 0};
        fds[n++] = (struct pollfd){.fd = listener, .events = POLLIN};
        for (int ch = 0; ch < LL_CHANNELS; ch++) {
            struct chan *c = &chans[ch];
            if (!c->state || c->fd < 0)
                continue;
            short events = 0;
            if (!c->rd_eof && c->credit > 0 && up_room() >= LL_HEADER + LL_MAX_DATA + LL_RESERVE)
                events |= POLLIN;
            if (c->out_len > 0)
                events |= POLLOUT;
            owner[n] = ch;
            fds[n++] = (struct pollfd){.fd = c->fd, .events = events};
        }
        if (poll(fds, (nfds_t)n, timeout) < 0) {
            if (errno == EINTR)
                continue;
            die("poll");
        }
        if (fds[0].revents)
            ll_read_down();
        for (int k = 3; k < n; k++)
            if (chans[owner[k]].state && chans[owner[k]].fd == fds[k].fd)
                ll_pump(owner[k], fds[k].revents);
        /* Credits owed with nothing to poll for: give them now. */
        for (int ch = 0; ch < LL_CHANNELS; ch++)
            if (chans[ch].state && chans[ch].fd >= 0 && chans[ch].owed >= LL_WINDOW_DOWN / 4)
                ll_pump(ch, 0);
        if (listener >= 0 && (fds[2].revents & POLLIN))
            ll_accept(listener);
        while (up_len > 0) {
            ssize_t w = write(1, up + up_off, up_len);
            if (w > 0) {
                up_off += (size_t)w;
                up_len -= (size_t)w;
                continue;
            }
            if (w < 0 && (errno == EAGAIN || errno == EINTR))
                break;
            exit(0); /* the stream is gone */
        }
        if (up_len == 0)
            up_off = 0;
    }
}
