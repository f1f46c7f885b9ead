/* The client side of `benches/serve_cpu.py`: keeps IN_FLIGHT `tools/call` requests of one tool
 * in flight on a `packs serve` over stdio, and measures the server (issue 30).
 *
 *     cc -O2 -o serve_driver benches/serve_driver.c
 *     ./serve_driver IN_FLIGHT CALLS TOOL PACKS [ARG...]
 *
 * It starts `PACKS ARG... serve` with pipes on its stdin and stdout (stderr to /dev/null), sends
 * 8 calls of TOOL and reads their answers (the warm-up: the first call builds what later calls
 * reuse, and 8 in flight start the pool's workers), then reads the server's CPU time
 * (/proc/PID/stat: user + system of every thread, the tools it starts excluded) around CALLS
 * calls, IN_FLIGHT kept in flight, and prints one line: the server's CPU per call (ms), the
 * calls per second, this driver's own CPU per call (ms), and the tools' CPU per call (ms: the
 * server's reaped children, /proc/PID/stat's cutime and cstime).
 *
 * Why C: the driver runs on the same cores as the server and the tools, and a Python driver
 * (a system call and a parse per line) cost about 0.07 ms of CPU per call, a third to a half of
 * what the server costs; the C spawner it is compared with has no driver at all. This one costs a few
 * microseconds per call (a write per request, a read per batch of answers), which it reports. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int to_server, from_server;
static char tool[256];
static char inbuf[1 << 16];
static size_t inlen;

static void die(const char *what) {
    perror(what);
    exit(1);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The server's CPU time (`tools` 0: user + system of its threads) or its reaped children's
 * (`tools` 1: the tools it started and waited for), in seconds. */
static double server_cpu(pid_t pid, int tools) {
    char path[64], text[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) die("open stat");
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0) die("read stat");
    text[n] = 0;
    /* The fields after the command name (which may hold spaces): state is the first,
     * utime the 12th, stime the 13th, cutime the 14th and cstime the 15th. */
    char *p = strrchr(text, ')');
    if (!p) die("stat");
    unsigned long long utime = 0, stime = 0, cutime = 0, cstime = 0;
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %llu %llu", &utime, &stime, &cutime,
               &cstime) != 4)
        die("stat fields");
    return (double)(tools ? cutime + cstime : utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

static double own_cpu(void) {
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return (double)r.ru_utime.tv_sec + (double)r.ru_stime.tv_sec +
           ((double)r.ru_utime.tv_usec + (double)r.ru_stime.tv_usec) / 1e6;
}

static void send_call(long id) {
    char line[512];
    int n = snprintf(line, sizeof line,
                     "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":\"tools/call\",\"params\":{\"name\":\"%s\",\"arguments\":{}}}\n",
                     id, tool);
    for (int off = 0; off < n;) {
        ssize_t w = write(to_server, line + off, (size_t)(n - off));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) die("write to the server");
        off += (int)w;
    }
}

/* Read until at least one whole answer is buffered; return how many whole answers were
 * consumed (each must be a result that is not an error). */
static long answers(void) {
    for (;;) {
        long whole = 0;
        size_t start = 0;
        for (size_t i = 0; i < inlen; i++) {
            if (inbuf[i] != '\n') continue;
            inbuf[i] = 0;
            if (!strstr(inbuf + start, "\"isError\":false")) {
                fprintf(stderr, "unexpected answer: %s\n", inbuf + start);
                exit(1);
            }
            whole++;
            start = i + 1;
        }
        memmove(inbuf, inbuf + start, inlen - start);
        inlen -= start;
        if (whole) return whole;
        if (inlen == sizeof inbuf) {
            fprintf(stderr, "an answer longer than %zu bytes\n", sizeof inbuf);
            exit(1);
        }
        ssize_t r = read(from_server, inbuf + inlen, sizeof inbuf - inlen);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) die("read from the server (it ended?)");
        inlen += (size_t)r;
    }
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s IN_FLIGHT CALLS TOOL PACKS [ARG...]\n", argv[0]);
        return 2;
    }
    long in_flight = atol(argv[1]), calls = atol(argv[2]);
    snprintf(tool, sizeof tool, "%s", argv[3]);
    if (in_flight < 1 || calls < 1) return 2;
    char **server_argv = calloc((size_t)argc - 2, sizeof *server_argv);
    for (int i = 4; i < argc; i++) server_argv[i - 4] = argv[i];
    server_argv[argc - 4] = "serve";
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC)) die("pipe");
    signal(SIGPIPE, SIG_IGN);
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0 || null < 0 || dup2(null, 2) < 0) _exit(126);
        setsid();
        execv(server_argv[0], server_argv);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    to_server = in[1];
    from_server = out[0];
    const long warm = 8;
    for (long i = 0; i < warm; i++) send_call(-1 - i);
    for (long got = 0; got < warm;) got += answers();
    double cpu = server_cpu(pid, 0), tools = server_cpu(pid, 1), mine = own_cpu(), start = now();
    long sent = 0, got = 0;
    while (sent < in_flight && sent < calls) send_call(++sent);
    while (got < calls) {
        long n = answers();
        got += n;
        for (long i = 0; i < n && sent < calls; i++) send_call(++sent);
    }
    double wall = now() - start;
    cpu = server_cpu(pid, 0) - cpu;
    tools = server_cpu(pid, 1) - tools;
    mine = own_cpu() - mine;
    printf("%.4f %.1f %.4f %.4f\n", cpu / (double)calls * 1000, (double)calls / wall, mine / (double)calls * 1000,
           tools / (double)calls * 1000);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return 0;
}
