/*
 * The stop of everything else in the sandbox, asked by agent-runner after each
 * command it ran there (SPEC §9; issue 41): the bridge reads the line "quiet" on
 * its stdin and answers "agent-runner-quiet FOUND LEFT"; the lifeline takes a
 * QUIET frame and answers QUIETED with the same text. Included by bridge.c.
 *
 * Why here and not only in the envelope's stop pass: the envelope is a shell of
 * the image, the parent of what it runs, and what it runs can write its memory
 * through /proc/<pid>/mem (same user, dumpable) and have it spare anything. PID 1
 * is agent-runner's, non-dumpable, and kill(-1) from it reaches every other
 * process of the sandbox; the request comes on a pipe only agent-runner holds.
 */
#include <dirent.h>

/* Live processes of the sandbox other than this one; a zombie is dead unless
 * threads of it are left (a leader that ended alone while its threads go on). */
static int others(void)
{
    DIR *proc = opendir("/proc");
    if (!proc)
        return -1;
    int n = 0, self = (int)getpid();
    struct dirent *e;
    while ((e = readdir(proc))) {
        int pid = atoi(e->d_name);
        if (pid <= 0 || pid == self)
            continue;
        char path[64], buf[2048];
        snprintf(path, sizeof path, "/proc/%d/status", pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t len = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (len <= 0)
            continue;
        buf[len] = 0;
        const char *state = strstr(buf, "\nState:\t"), *threads = strstr(buf, "\nThreads:\t");
        if (state && state[8] == 'Z' && (!threads || atoi(threads + 10) <= 1))
            continue;
        n++;
    }
    closedir(proc);
    return n;
}

/* SIGKILL to every other process until none is left (5 s at most); writes
 * "FOUND LEFT" into `out`. Only PID 1 can: anywhere else nothing is killed. */
static int quiet(char *out, size_t size)
{
    int found = others(), left = found;
    for (int i = 0; getpid() == 1 && left > 0 && i < 200; i++) {
        kill(-1, SIGKILL);
        usleep(25000);
        reap(0);
        left = others();
    }
    return snprintf(out, size, "%d %d", found, left);
}
