/*
 * The preflight's lookup of the test command's program (SPEC §21) by the sandbox's
 * main process as it starts (bridge.c, lifeline.c: `find=PROGRAM`), so that where
 * the answer is certain no exec is needed. Included by bridge.c.
 */
#include <elf.h>

#if defined(__x86_64__)
#define FIND_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define FIND_MACHINE EM_AARCH64
#else
#define FIND_MACHINE EM_NONE /* never matches: the shell is always asked */
#endif

/* An executable regular file, without opening it. */
static int executable(const char *path)
{
    struct stat st;
    return access(path, X_OK) == 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Whether /bin/sh can run here, as far as its header tells: an executable ELF file
 * of this machine's kind (64-bit, little-endian, the helper's own architecture),
 * whose loader, if it names one, is there. A script, another architecture, a
 * loader missing: the shell is asked (its exec says why it cannot run). A missing
 * library is not seen: the first exec then fails, after the preflight. */
static int shell_runs(void)
{
    const char *sh = "/bin/sh";
    if (!executable(sh))
        return 0;
    int fd = open(sh, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return 0;
    Elf64_Ehdr eh;
    struct stat st;
    int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && pread(fd, &eh, sizeof eh, 0) == (ssize_t)sizeof eh &&
             memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 && eh.e_ident[EI_CLASS] == ELFCLASS64 &&
             eh.e_ident[EI_DATA] == ELFDATA2LSB && eh.e_machine == FIND_MACHINE &&
             eh.e_phentsize == sizeof(Elf64_Phdr) && eh.e_phnum < 64;
    for (int i = 0; ok && i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + (Elf64_Off)i * sizeof ph)) != (ssize_t)sizeof ph) {
            ok = 0;
        } else if (ph.p_type == PT_INTERP) {
            char loader[256];
            ok = ph.p_filesz > 1 && ph.p_filesz <= sizeof loader &&
                 pread(fd, loader, ph.p_filesz, (off_t)ph.p_offset) == (ssize_t)ph.p_filesz &&
                 loader[ph.p_filesz - 1] == 0 && loader[0] == '/' && executable(loader);
        }
    }
    close(fd);
    return ok;
}

/* Whether `/bin/sh -c 'command -v PROGRAM'` finds PROGRAM for certain, as the
 * container's user with its PATH: /bin/sh can run (`shell_runs`), and PROGRAM is a
 * builtin every POSIX shell has (the special ones and a few more; `echo`, `printf`
 * and `test` are build options of some), or an executable file in an absolute PATH
 * entry (one with a `%`, an option to dash and ash, skipped). Anything else is left
 * to the shell: "unknown" is never wrong. */
static int finds(const char *program)
{
    static const char *const builtins[] = {
        ":", ".", "break", "continue", "eval", "exec", "exit", "export", "readonly", "return", "set",
        "shift", "times", "trap", "unset", "cd", "command", "false", "pwd", "read", "true", "umask",
        "wait", NULL,
    };
    if (*program == 0 || strchr(program, '/') || !shell_runs())
        return 0;
    for (int i = 0; builtins[i]; i++)
        if (strcmp(program, builtins[i]) == 0)
            return 1;
    char path[4096];
    const char *dirs = getenv("PATH");
    while (dirs && *dirs) {
        size_t n = strcspn(dirs, ":");
        if (n > 0 && dirs[0] == '/' && !memchr(dirs, '%', n) && n + 1 + strlen(program) < sizeof path) {
            memcpy(path, dirs, n);
            path[n] = '/';
            strcpy(path + n + 1, program);
            if (executable(path))
                return 1;
        }
        dirs += n + (dirs[n] == ':');
    }
    return 0;
}
