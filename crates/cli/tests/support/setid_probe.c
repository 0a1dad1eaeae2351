/* Tries every way a process can give a file a setuid or setgid bit, or file
 * capabilities, in the current directory, and prints one line per way:
 * "setid-probe <way> <ok|errno name>". Run by a fake worker in the sandbox
 * (tests/boundary.rs); built static by tests/support/mod.rs. The last ways are
 * ordinary modes, which must keep working. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

static void report(const char *way, long rc) {
  printf("setid-probe %s %s\n", way, rc < 0 ? strerrorname_np(errno) : "ok");
  fflush(stdout);
}

#if defined(__x86_64__)
/* chmod through the i386 system call table (int $0x80): the filter must cover the
 * 32-bit ABI too. Run in a child, as a kernel without ia32 emulation kills it. */
static const char int80_file[] = "by-int80";
static void int80_chmod(void) {
  close(open(int80_file, O_CREAT | O_WRONLY, 0755));
  pid_t child = fork();
  if (child == 0) {
    long rc;
    __asm__ volatile("int $0x80" : "=a"(rc) : "a"(15), "b"(int80_file), "c"(04755) : "memory");
    if (rc < 0) { errno = -rc; rc = -1; }
    report("chmod-i386", rc);
    _exit(0);
  }
  int status;
  waitpid(child, &status, 0);
  if (WIFSIGNALED(status)) printf("setid-probe chmod-i386 unavailable\n");
}
#endif

int main(void) {
  int fd = open("plain", O_CREAT | O_WRONLY, 0755);
  report("open-0755", fd);
  report("chmod", chmod("plain", 04755));
  report("fchmod", fchmod(fd, 02755));
  report("fchmodat", fchmodat(AT_FDCWD, "plain", 06755, 0));
  report("fchmodat-nofollow", fchmodat(AT_FDCWD, "plain", 04755, AT_SYMLINK_NOFOLLOW));
  report("fchmodat2", syscall(452, AT_FDCWD, "plain", 04755, 0));
  report("open", syscall(SYS_open, "by-open", O_CREAT | O_WRONLY, 04755));
  report("openat", syscall(SYS_openat, AT_FDCWD, "by-openat", O_CREAT | O_WRONLY, 04755));
  report("creat", syscall(SYS_creat, "by-creat", 02755));
  report("o-tmpfile", syscall(SYS_openat, AT_FDCWD, ".", O_TMPFILE | O_WRONLY, 04755));
  struct open_how how = {.flags = O_CREAT | O_WRONLY, .mode = 04755};
  report("openat2", syscall(SYS_openat2, AT_FDCWD, "by-openat2", &how, sizeof how));
  report("mknod", syscall(SYS_mknod, "by-mknod", S_IFREG | 04755, 0));
  report("mknodat", syscall(SYS_mknodat, AT_FDCWD, "by-mknodat", S_IFREG | 02755, 0));
  report("mkdir", syscall(SYS_mkdir, "dir-mkdir", 02775));
  report("mkdirat", syscall(SYS_mkdirat, AT_FDCWD, "dir-mkdirat", 04775));
  report("x32-chmod", syscall(0x40000000 | SYS_chmod, "plain", 04755));
  struct io_uring_params params;
  memset(&params, 0, sizeof params);
  report("io_uring_setup", syscall(SYS_io_uring_setup, 4, &params));
  /* VFS_CAP_REVISION_2, CAP_SETUID permitted and effective. */
  static const unsigned char cap[20] = {0x01, 0, 0, 0x02, 0x80};
  report("setxattr-capability", setxattr("plain", "security.capability", cap, sizeof cap, 0));
#if defined(__x86_64__)
  int80_chmod();
#endif
  /* Ordinary modes keep working. */
  report("chmod-0700", chmod("plain", 0700));
  report("chmod-sticky", chmod("plain", 01755));
  report("open-0644", syscall(SYS_openat, AT_FDCWD, "ordinary", O_CREAT | O_WRONLY, 0644));
  report("mkfifo", mkfifo("fifo", 0644));
  report("mkdir-0755", mkdir("dir-ordinary", 0755));
  return 0;
}
