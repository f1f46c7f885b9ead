/* A spawner that confines each child the way packs confines a `read_only` tool, without packs
 * (issue 30: the baseline `benches/serve_cpu.py` compares `packs serve` at 8 in flight with).
 *
 *     cc -O2 -pthread -o spawner benches/spawner.c && ./spawner [--capture] THREADS CALLS PROGRAM [DENIED...]
 *
 * Each of THREADS threads spawns PROGRAM (an absolute path), waits for it, and again, until
 * CALLS children ran in all; it prints the calls per second, its own CPU time per call in
 * milliseconds (user + system of its threads, the children excluded: what `packs serve`'s CPU per
 * call is compared with) and its children's per call. Per child, as packs does: a private
 * directory made in /dev/shm and removed after, a Landlock ruleset handling every write right with
 * that directory and /dev/null and /dev/zero granted, signals and abstract Unix sockets scoped
 * (ABI 6), built in the parent; a read ruleset built once: the whole tree listable, and read
 * rights on every entry of each directory on the way from / to a DENIED path (absolute, links
 * resolved: `packs sandbox --json` lists packs' as `reads_denied`) but the ones leading to a
 * denied path, links and a denied file's temporary names, as packs' read domain does (without
 * DENIED paths, the root readable); it prints how many rules it has on stderr. Unlike packs, it
 * does not look at inodes: a file with a second name (a hard link) is granted, and an entry that
 * is another name of a denied one is granted too, so where a home has such entries it makes a
 * few rules more than packs. In the child
 * (vfork): setpgid, no_new_privs, both landlock_restrict_self (the write ruleset first: a
 * domain copies the rules of the ones entered before it), a seccomp filter (sockets other than
 * Unix and netlink, io_uring, the TIOCSTI and TIOCLINUX ioctls refused), execve.
 *
 * With --capture it also does what any runner of tools does besides confining them, as packs
 * does: the child's stdout and stderr are pipes, read until both close, with the child's pidfd
 * polled beside them (what a timeout needs), and its process group killed after (what it left
 * behind). Nothing here is packs code. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};

struct path_beneath {
    uint64_t allowed_access;
    int32_t parent_fd;
} __attribute__((packed));

#define RULE_PATH_BENEATH 1
/* Write rights up to ABI 5: WRITE_FILE, REMOVE_*, MAKE_*, REFER, TRUNCATE, IOCTL_DEV. */
#define WRITES ((1ULL << 1) | (0x1FFULL << 4) | (1ULL << 13) | (1ULL << 14) | (1ULL << 15))
#define READS ((1ULL << 0) | (1ULL << 2) | (1ULL << 3) | (1ULL << 13))
#define SCOPE_ABSTRACT_UNIX 1
#define SCOPE_SIGNAL 2

static const char *program;
static int capture;
static int read_ruleset;
static atomic_long remaining;
static struct sock_fprog filter;

static int create_ruleset(struct ruleset_attr *attr) {
    return (int)syscall(SYS_landlock_create_ruleset, attr, sizeof *attr, 0);
}

static int add_path(int ruleset, const char *path, uint64_t access) {
    struct path_beneath rule = {.allowed_access = access, .parent_fd = open(path, O_PATH | O_CLOEXEC)};
    if (rule.parent_fd < 0) return -1;
    int r = (int)syscall(SYS_landlock_add_rule, ruleset, RULE_PATH_BENEATH, &rule, 0);
    close(rule.parent_fd);
    return r;
}

static void die(const char *what) {
    perror(what);
    exit(1);
}

/* Read the child's output until both pipes close and its pidfd says it ended, then kill its
 * process group. */
static void drain(pid_t pid, int out[2], int err[2]) {
    close(out[1]);
    close(err[1]);
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0) die("pidfd_open");
    struct pollfd fds[3] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}, {pidfd, POLLIN, 0}};
    char buf[4096];
    while (fds[0].fd >= 0 || fds[1].fd >= 0 || fds[2].fd >= 0) {
        if (poll(fds, 3, 30000) <= 0) die("poll");
        if (fds[2].revents) fds[2].fd = -1;
        for (int i = 0; i < 2; i++)
            if (fds[i].fd >= 0 && fds[i].revents && read(fds[i].fd, buf, sizeof buf) <= 0) {
                close(fds[i].fd);
                fds[i].fd = -1;
            }
    }
    kill(-pid, SIGKILL);
    close(pidfd);
}

static void *worker(void *unused) {
    (void)unused;
    char tmp[64], env_tmp[80];
    char *argv[] = {(char *)program, NULL};
    char *envp[] = {"PATH=/usr/local/bin:/usr/bin:/bin", env_tmp, NULL};
    while (atomic_fetch_sub(&remaining, 1) > 0) {
        strcpy(tmp, "/dev/shm/spawner-XXXXXX");
        if (!mkdtemp(tmp)) die("mkdtemp");
        snprintf(env_tmp, sizeof env_tmp, "TMPDIR=%s", tmp);
        struct ruleset_attr attr = {.handled_access_fs = WRITES, .scoped = SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL};
        int ruleset = create_ruleset(&attr);
        if (ruleset < 0) die("landlock_create_ruleset");
        uint64_t file = (1ULL << 1) | (1ULL << 14);
        if (add_path(ruleset, tmp, WRITES) || add_path(ruleset, "/dev/null", file) || add_path(ruleset, "/dev/zero", file))
            die("landlock_add_rule");
        int out[2] = {-1, -1}, err[2] = {-1, -1};
        if (capture && (pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC))) die("pipe2");
        pid_t pid = vfork();
        if (pid == 0) {
            if ((capture && (dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0)) || setpgid(0, 0) || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
                syscall(SYS_landlock_restrict_self, ruleset, 0) || syscall(SYS_landlock_restrict_self, read_ruleset, 0) ||
                syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &filter))
                _exit(126);
            execve(program, argv, envp);
            _exit(127);
        }
        if (pid < 0) die("vfork");
        close(ruleset);
        if (capture) drain(pid, out, err);
        int status;
        if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "child failed: %d\n", status);
            exit(1);
        }
        if (rmdir(tmp)) die("rmdir");
    }
    return NULL;
}

static char **denied;
static int denied_count, read_rules;

/* Whether `name` is a denied file's temporary, lock or backup name: the file's name followed by
 * '.', '~' or '-' and more. */
static int near(const char *name, const char *file) {
    size_t n = strlen(file);
    return strncmp(name, file, n) == 0 && (name[n] == '.' || name[n] == '~' || name[n] == '-');
}

/* Read rights on every entry of `dir` (which holds a denied path below it) but the denied ones,
 * the directories on the way to them opened up in turn. */
static void open_up(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    size_t len = strlen(dir);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char path[4096];
        if (snprintf(path, sizeof path, "%s/%s", len == 1 ? "" : dir, e->d_name) >= (int)sizeof path) continue;
        size_t plen = strlen(path);
        int skip = 0, on_the_way = 0;
        for (int i = 0; i < denied_count; i++) {
            const char *p = denied[i], *slash = strrchr(p, '/');
            if (!strcmp(p, path) || (strncmp(p, dir, len) == 0 && slash == p + (len == 1 ? 0 : len) && near(e->d_name, slash + 1)))
                skip = 1;
            else if (strncmp(p, path, plen) == 0 && p[plen] == '/')
                on_the_way = 1;
        }
        struct stat st;
        if (skip || lstat(path, &st) || S_ISLNK(st.st_mode)) continue;
        if (S_ISDIR(st.st_mode) && on_the_way) {
            open_up(path);
        } else if (!add_path(read_ruleset, path, S_ISDIR(st.st_mode) ? READS : (1ULL << 0) | (1ULL << 2))) {
            read_rules++;
        }
    }
    closedir(d);
}

#define LOAD(off) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (off))
#define ARG0 offsetof(struct seccomp_data, args[0])
#define ARG1 offsetof(struct seccomp_data, args[1])
#define DENY BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM)
#define ALLOW BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)

int main(int argc, char **argv) {
    capture = argc > 1 && !strcmp(argv[1], "--capture");
    argc -= capture;
    argv += capture;
    if (argc < 4) {
        fprintf(stderr, "usage: spawner [--capture] THREADS CALLS PROGRAM [DENIED...]\n");
        return 2;
    }
    int threads = atoi(argv[1]);
    long calls = atol(argv[2]);
    program = argv[3];
    static struct sock_filter code[] = {
        LOAD(offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        DENY,
        LOAD(offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_socket, 3, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_io_uring_setup, 8, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_ioctl, 4, 0),
        ALLOW,
        /* socket: */ LOAD(ARG0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_UNIX, 5, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_NETLINK, 4, 3),
        /* ioctl: */ LOAD(ARG1),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TIOCSTI, 1, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TIOCLINUX, 0, 1),
        DENY,
        ALLOW,
    };
    filter.len = sizeof code / sizeof code[0];
    filter.filter = code;
    struct ruleset_attr attr = {.handled_access_fs = READS};
    read_ruleset = create_ruleset(&attr);
    denied = argv + 4;
    denied_count = argc - 4;
    if (read_ruleset < 0) die("read ruleset");
    if (denied_count == 0) {
        if (add_path(read_ruleset, "/", READS)) die("read ruleset");
    } else {
        if (add_path(read_ruleset, "/", (1ULL << 3) | (1ULL << 13))) die("read ruleset");
        open_up("/");
    }
    fprintf(stderr, "%d read rules\n", 1 + read_rules);
    atomic_store(&remaining, calls);
    pthread_t ids[256];
    if (threads < 1 || threads > 256) return 2;
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (int i = 0; i < threads; i++)
        if (pthread_create(&ids[i], NULL, worker, NULL)) die("pthread_create");
    for (int i = 0; i < threads; i++) pthread_join(ids[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &end);
    double secs = (double)(end.tv_sec - start.tv_sec) + (double)(end.tv_nsec - start.tv_nsec) / 1e9;
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    double cpu = (double)usage.ru_utime.tv_sec + (double)usage.ru_stime.tv_sec +
                 ((double)usage.ru_utime.tv_usec + (double)usage.ru_stime.tv_usec) / 1e6;
    struct rusage tools;
    getrusage(RUSAGE_CHILDREN, &tools);
    double tools_cpu = (double)tools.ru_utime.tv_sec + (double)tools.ru_stime.tv_sec +
                       ((double)tools.ru_utime.tv_usec + (double)tools.ru_stime.tv_usec) / 1e6;
    printf("%.1f %.4f %.4f\n", (double)calls / secs, cpu / (double)calls * 1000, tools_cpu / (double)calls * 1000);
    return 0;
}
