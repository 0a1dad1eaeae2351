/*
 * The carrier as the sandbox's PID 1 (SPEC §9; issue 41): the bridge, its keep-alive
 * mode and the lifeline are the container's first process, with no init of the
 * engine's (docker-init, catatonit) above them. Included by bridge.c.
 *
 * Why: the worker runs as the same user as PID 1 and the carrier, and a process
 * of that user can write another's memory through /proc/<pid>/mem (ptrace and
 * process_vm_* are refused by the seccomp profile): it made an engine's init run
 * its own program, which the stop pass between runs spares, and so outlived every
 * run. A non-dumpable process cannot be opened that way by anything without
 * CAP_SYS_PTRACE, which no sandbox has, root or not; an init of the engine's
 * cannot be made so, ours is made so before anything else runs in the container.
 * As PID 1 it also takes no signal it has no handler for from inside (SIGKILL and
 * SIGSTOP included), so the worker can neither end nor freeze it. gVisor (runsc)
 * spares an init nothing: a signal that ends it ends the container, SIGSTOP
 * freezes it until its next stop request goes unanswered; the task fails either
 * way, closed (docs/tools-and-runtimes.md).
 *
 * An init reaps what is left to it: every orphan of the sandbox becomes its child,
 * and it waits for them as they end (the helper itself starts no child).
 */
#include <sys/prctl.h>
#include <sys/wait.h>

static void reap(int sig)
{
    int saved = errno;
    (void)sig;
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
        exec_reaped(pid, status);
    errno = saved;
}

/* First thing of every carrier mode: untraceable, and an init when PID 1. */
static void become_init(void)
{
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
        die("cannot make itself non-dumpable");
    if (getpid() != 1)
        return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = reap;
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGCHLD, &sa, NULL) != 0)
        die("sigaction");
    reap(0);
}

/* The environment's strings blanked in place, once nothing needs them: gVisor
 * lets the worker read /proc/1/environ, non-dumpable or not; it then reads zeros. */
static void forget_environment(void)
{
    extern char **environ;
    for (char **e = environ; e && *e; e++)
        memset(*e, 0, strlen(*e));
}
