/*
 * Commands started by the sandbox's main process instead of the engine's exec
 * (SPEC §27; backend/main_exec.rs the host's side): the request "exec LEN" on the
 * control socket, with four descriptors passed beside it (SCM_RIGHTS: the
 * command's stdin, stdout and stderr, and a socket its wait status goes on: a
 * socket cannot be opened through /proc/1/fd, which gVisor lets the worker open,
 * so only the helper can say the status), then LEN bytes of NUL-ended fields:
 * "D" the directory, "A" each argument, "E" each variable (over the container's
 * own). The answer is "agent-runner-exec PID", or "agent-runner-exec-refused"
 * (not four descriptors, EXEC_SLOTS running, or not PID 1), and the status
 * "STATUS\n" (waitpid's) goes on the fourth descriptor once the command is
 * reaped. "signal PID SIG" sends SIG to the command's process group. Included
 * by bridge.c.
 *
 * Why: an engine's exec costs ~60 ms and ~0.06 CPU-s of its client, daemon and
 * runtime per command; a fork here costs a millisecond. What the command gets
 * is what the engine's exec would give it: the main process runs as the
 * container's user with its capabilities, seccomp filter, cgroup and namespaces,
 * and the variables it started with (kept before they are blanked); the command
 * gets its own process group in the helper's session (`docker exec` gives it a
 * session of its own; a session of its own would orphan the group: see
 * exec_child), the signals' defaults, umask 022 and nothing of the helper's
 * descriptors. The request comes on the socket only agent-runner holds
 * (bridge.c); the child is non-dumpable until its execve, so nothing of the
 * helper's memory is readable from it.
 */
#include <dirent.h>
#include <sys/syscall.h>

/* The longest request taken: the envelope's script, the variables, a private file. */
#define EXEC_MAX (4 << 20)
/* Commands running at once (an exec beside another: the copy, the probe). */
#define EXEC_SLOTS 16

struct running {
    pid_t pid;
    int status_fd;
};
static struct running execs[EXEC_SLOTS];
/* The container's variables, as the main process got them. */
static char **base_env;
static int base_env_len;

static void keep_environment(void)
{
    extern char **environ;
    int n = 0;
    while (environ && environ[n])
        n++;
    base_env = calloc((size_t)n + 1, sizeof *base_env);
    if (!base_env)
        die("calloc");
    for (int i = 0; i < n; i++)
        if (!(base_env[i] = strdup(environ[i])))
            die("strdup");
    base_env_len = n;
}

/* From the SIGCHLD handler: async-signal-safe only. */
static void exec_reaped(pid_t pid, int status)
{
    for (int i = 0; i < EXEC_SLOTS; i++) {
        if (execs[i].pid != pid)
            continue;
        char text[24], digits[16];
        int n = 0, d = 0;
        unsigned int v = (unsigned int)status;
        do {
            digits[d++] = (char)('0' + v % 10);
            v /= 10;
        } while (v && d < (int)sizeof digits);
        while (d > 0)
            text[n++] = digits[--d];
        text[n++] = '\n';
        ssize_t w = write(execs[i].status_fd, text, (size_t)n);
        (void)w;
        close(execs[i].status_fd);
        execs[i].pid = 0;
        execs[i].status_fd = -1;
        return;
    }
}

static int name_len(const char *entry)
{
    const char *eq = strchr(entry, '=');
    return eq ? (int)(eq - entry) : (int)strlen(entry);
}

/* Every descriptor above 2 that /proc/self/fd lists, closed. */
static void close_listed(void)
{
    DIR *dir = opendir("/proc/self/fd");
    if (!dir)
        return;
    int fds[1024], n = 0, own = dirfd(dir);
    struct dirent *e;
    while ((e = readdir(dir)) && n < 1024) {
        int fd = atoi(e->d_name);
        if (fd > 2 && fd != own)
            fds[n++] = fd;
    }
    closedir(dir);
    for (int i = 0; i < n; i++)
        close(fds[i]);
}

/* In the child: never returns. */
static void exec_child(int fds[4], char *dir, char **args, char **env)
{
    sigset_t none;
    sigemptyset(&none);
    for (int s = 1; s < NSIG; s++)
        signal(s, SIG_DFL);
    sigprocmask(SIG_SETMASK, &none, NULL);
    /* A group of its own, for the signals, in the main process's session: a
     * session of its own would make the group orphaned, and the kernel hangs up
     * an orphaned group once one of it is stopped (the stop pass's STOP). */
    setpgid(0, 0);
    if (dup2(fds[0], 0) < 0 || dup2(fds[1], 1) < 0 || dup2(fds[2], 2) < 0)
        _exit(126);
    /* Every descriptor of the helper's is close-on-exec already; closed here too,
     * whatever it is. Where close_range(2) is missing (gVisor), those listed: a
     * loop over every number would cost a trap per number there. */
    if (syscall(SYS_close_range, 3U, ~0U, 0U) != 0)
        close_listed();
    umask(022);
    if (dir && *dir && chdir(dir) != 0) {
        dprintf(2, "agent-runner-helper: exec failed: chdir to %s: %s\n", dir, strerror(errno));
        _exit(126);
    }
    extern char **environ;
    environ = env;
    execvp(args[0], args);
    int code = errno == ENOENT || errno == ENOTDIR ? 127 : 126;
    dprintf(2, "agent-runner-helper: exec failed: %s: %s\n", args[0], strerror(errno));
    _exit(code);
}

/* Starts the request `req` (LEN bytes) with `fds`; the answer's text into `out`.
 * The descriptors are closed here, whatever happens. */
static int exec_start(char *req, size_t len, int fds[4], int nfds, char *out, size_t size)
{
    int slot = -1;
    for (int i = 0; i < EXEC_SLOTS && slot < 0; i++)
        if (execs[i].pid == 0)
            slot = i;
    int answer = 0;
    char *dir = NULL;
    size_t nargs = 0, nenv = 0;
    for (size_t at = 0; at < len;) {
        char *field = req + at;
        size_t flen = strnlen(field, len - at);
        if (at + flen >= len)
            break; /* not NUL-ended: the last field is dropped */
        if (field[0] == 'A')
            nargs++;
        else if (field[0] == 'E' && strchr(field, '='))
            nenv++;
        else if (field[0] == 'D')
            dir = field + 1;
        at += flen + 1;
    }
    char **args = NULL, **env = NULL;
    /* Only PID 1 reaps its children and says their status (init.c): elsewhere
     * (an engine's init above it) the engine's exec runs the command. */
    if (nfds != 4 || slot < 0 || nargs == 0 || getpid() != 1)
        goto refused;
    args = calloc(nargs + 1, sizeof *args);
    env = calloc((size_t)base_env_len + nenv + 1, sizeof *env);
    if (!args || !env)
        goto refused;
    size_t a = 0, e = 0;
    for (int i = 0; i < base_env_len; i++)
        env[e++] = base_env[i];
    for (size_t at = 0; at < len;) {
        char *field = req + at;
        size_t flen = strnlen(field, len - at);
        if (at + flen >= len)
            break;
        if (field[0] == 'A') {
            args[a++] = field + 1;
        } else if (field[0] == 'E' && strchr(field, '=')) {
            char *var = field + 1;
            int n = name_len(var);
            size_t k = 0;
            while (k < e && !(name_len(env[k]) == n && strncmp(env[k], var, (size_t)n) == 0))
                k++;
            env[k] = var;
            if (k == e)
                e++;
        }
        at += flen + 1;
    }
    /* The child's end is recorded before SIGCHLD can say it ended. */
    sigset_t chld, old;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, &old);
    pid_t pid = fork();
    if (pid == 0)
        exec_child(fds, dir, args, env);
    if (pid > 0) {
        /* Its group exists before the answer names it (the child makes it too). */
        setpgid(pid, pid);
        /* Never a blocking write in the SIGCHLD handler. */
        fcntl(fds[3], F_SETFL, fcntl(fds[3], F_GETFL) | O_NONBLOCK);
        execs[slot].pid = pid;
        execs[slot].status_fd = fds[3];
        fds[3] = -1;
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (pid < 0)
        goto refused;
    answer = snprintf(out, size, "agent-runner-exec %d\n", (int)pid);
    goto done;
refused:
    answer = snprintf(out, size, "agent-runner-exec-refused\n");
done:
    free(args);
    free(env);
    for (int i = 0; i < nfds; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    return answer;
}

/* "signal PID SIG": to a running command's process group, and to it. */
static void exec_signal(const char *line)
{
    int pid = 0, sig = 0;
    if (sscanf(line, "signal %d %d", &pid, &sig) != 2 || pid <= 1 || sig <= 0 || sig >= NSIG)
        return;
    for (int i = 0; i < EXEC_SLOTS; i++)
        if (execs[i].pid == pid) {
            kill(-pid, sig);
            kill(pid, sig);
        }
}

/* read(2) of the control socket, taking the descriptors passed with the bytes:
 * kept in `passed` (four at most; any more, or any with a truncated message,
 * closed). */
static ssize_t receive(int fd, char *buf, size_t size, int passed[4], int *npassed)
{
    struct iovec iov = {.iov_base = buf, .iov_len = size};
    union {
        struct cmsghdr align;
        char space[CMSG_SPACE(8 * sizeof(int))];
    } control;
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.space;
    msg.msg_controllen = sizeof control.space;
    ssize_t r = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    if (r < 0)
        return r;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        int n = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        int *fds = (int *)CMSG_DATA(c);
        for (int i = 0; i < n; i++) {
            if (*npassed < 4 && !(msg.msg_flags & MSG_CTRUNC))
                passed[(*npassed)++] = fds[i];
            else
                close(fds[i]);
        }
    }
    return r;
}

/* The request "exec LEN" read: its LEN bytes (`have` of them read already, in
 * `head`) and the passed descriptors; started, and the answer's text. */
static int exec_request(int fd, long len, const char *head, size_t have, int passed[4], int *npassed,
                        char *out, size_t size)
{
    int fds[4] = {-1, -1, -1, -1}, nfds = *npassed;
    for (int i = 0; i < nfds; i++)
        fds[i] = passed[i];
    *npassed = 0;
    /* Bytes left unread would be taken for requests: agent-runner never sends
     * this, so the sandbox ends. */
    if (len <= 0 || len > EXEC_MAX)
        die("an exec request of a bad length");
    char *req = malloc((size_t)len);
    if (!req)
        die("an exec request's memory");
    size_t got = have < (size_t)len ? have : (size_t)len;
    memcpy(req, head, got);
    /* The rest comes at once, from agent-runner; a stalled one ends the sandbox. */
    struct timeval limit = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    while (got < (size_t)len) {
        ssize_t r = receive(fd, req + got, (size_t)len - got, passed, npassed);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            die("the exec request");
        got += (size_t)r;
    }
    limit.tv_sec = 0;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    int answer = exec_start(req, (size_t)len, fds, nfds, out, size);
    /* The variables' values are not left in freed memory. */
    explicit_bzero(req, (size_t)len);
    free(req);
    return answer;
}
