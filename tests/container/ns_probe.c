/* What crosses a container boundary (issue 9, part 3): a small probe run on
 * both sides of scripts/analyze-in-container.sh.
 *
 *   ns_probe sem-create NAME          create named POSIX semaphore NAME (in /dev/shm)
 *   ns_probe sem-open NAME            exit 0 when NAME opens, 1 when it does not exist here
 *   ns_probe sem-unlink NAME
 *   ns_probe futex-ping FILE ROUNDS CMD [ARG...]
 *       creates FILE (one page, mapped shared), starts CMD (which must run
 *       `ns_probe futex-pong FILE`, e.g. inside a container), waits for it to
 *       say ready, then plays ROUNDS ping-pongs through two futex words in
 *       the mapping (FUTEX_WAIT/FUTEX_WAKE, not the _PRIVATE forms: those key
 *       on the address space, these on the file page, so they cross
 *       processes and namespaces). Prints one JSON line: start_ms (CMD
 *       launched -> pong ready) and the round trip in microseconds.
 *   ns_probe futex-pong FILE          answers every ping until told to stop
 *   ns_probe attach METADATA          attaches read-only through the C ABI and
 *                                     prints the sum of the elements (float64)
 * Every wait has a timeout (5 s): a vanished peer is an error, not a hang. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/futex.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tessera.h"

enum { kPing = 0, kPong = 1, kReady = 2, kStop = 3 };  /* word indices in the page */

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static long futex(_Atomic uint32_t* word, int op, uint32_t value, const struct timespec* timeout) {
  return syscall(SYS_futex, (uint32_t*)word, op, value, timeout, NULL, 0);
}

/* Blocks until *word != old; 0, or -1 after the deadline (5 s in all). */
static int wait_change(_Atomic uint32_t* word, uint32_t old) {
  double deadline = now_us() + 5e6;
  while (atomic_load(word) == old) {
    double left = deadline - now_us();
    if (left <= 0) return -1;
    struct timespec t = {(time_t)(left / 1e6), (long)((left - (double)(time_t)(left / 1e6) * 1e6) * 1e3)};
    futex(word, FUTEX_WAIT, old, &t);  /* EAGAIN (changed already), EINTR, ETIMEDOUT: re-check */
  }
  return 0;
}

static void set_and_wake(_Atomic uint32_t* word, uint32_t value) {
  atomic_store(word, value);
  futex(word, FUTEX_WAKE, 1, NULL);
}

static _Atomic uint32_t* map_page(const char* path, int create) {
  int fd = open(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_EXCL : 0), 0600);
  if (fd < 0 || (create && ftruncate(fd, 4096) != 0)) {
    fprintf(stderr, "ns_probe: %s: %s\n", path, strerror(errno));
    exit(2);
  }
  void* p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    fprintf(stderr, "ns_probe: mmap %s: %s\n", path, strerror(errno));
    exit(2);
  }
  return (_Atomic uint32_t*)p;
}

static int ping(const char* path, int rounds, char** cmd) {
  _Atomic uint32_t* w = map_page(path, 1);
  double launched = now_us();
  pid_t child = fork();
  if (child == 0) {
    execvp(cmd[0], cmd);
    _exit(127);
  }
  int rc = 0;
  if (wait_change(&w[kReady], 0) != 0) {
    fprintf(stderr, "ns_probe: the pong side never became ready (5 s)\n");
    rc = 1;
  }
  double ready = now_us(), total = 0, worst = 0;
  for (int i = 1; rc == 0 && i <= rounds; ++i) {
    double t = now_us();
    set_and_wake(&w[kPing], (uint32_t)i);
    if (wait_change(&w[kPong], (uint32_t)(i - 1)) != 0) {
      fprintf(stderr, "ns_probe: no pong for ping %d within 5 s\n", i);
      rc = 1;
    }
    double dt = now_us() - t;
    total += dt;
    if (dt > worst) worst = dt;
  }
  set_and_wake(&w[kStop], 1);
  set_and_wake(&w[kPing], 0xFFFFFFFFu);
  int status = 0;
  waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "ns_probe: the pong command failed (status %d)\n", status);
    rc = 1;
  }
  unlink(path);
  if (rc == 0)
    printf("{\"probe\":\"futex\",\"rounds\":%d,\"start_ms\":%.1f,\"round_trip_us\":%.1f,\"worst_us\":%.1f}\n",
           rounds, (ready - launched) / 1e3, total / rounds, worst);
  return rc;
}

static int pong(const char* path) {
  _Atomic uint32_t* w = map_page(path, 0);
  set_and_wake(&w[kReady], 1);
  uint32_t seen = 0;
  for (;;) {
    if (wait_change(&w[kPing], seen) != 0) {
      fprintf(stderr, "ns_probe: no ping within 5 s\n");
      return 1;
    }
    seen = atomic_load(&w[kPing]);
    if (atomic_load(&w[kStop])) return 0;
    set_and_wake(&w[kPong], seen);
  }
}

static int attach(const char* metadata) {
  tessera_array* a = NULL;
  if (tessera_attach(metadata, TESSERA_READ_ONLY, &a) != 0) {
    fprintf(stderr, "ns_probe: %s\n", tessera_last_error());
    return 1;
  }
  double sum = 0;
  for (int s = 0; s < tessera_segment_count(a); ++s) {
    const double* x = tessera_segment_data(a, s);
    for (uint64_t i = 0; i < tessera_segment_length(a, s); ++i) sum += x[i];
  }
  printf("attached %" PRIu64 " elements, sum %.1f\n", tessera_length(a), sum);
  tessera_detach(a);
  return 0;
}

int main(int argc, char** argv) {
  if (argc >= 3 && strcmp(argv[1], "sem-create") == 0) {
    sem_t* s = sem_open(argv[2], O_CREAT | O_EXCL, 0600, 0);
    if (s == SEM_FAILED) {
      fprintf(stderr, "ns_probe: sem_open %s: %s\n", argv[2], strerror(errno));
      return 2;
    }
    return 0;
  }
  if (argc >= 3 && strcmp(argv[1], "sem-open") == 0) {
    sem_t* s = sem_open(argv[2], 0);
    if (s == SEM_FAILED) {
      printf("semaphore %s: %s\n", argv[2], strerror(errno));
      return 1;
    }
    printf("semaphore %s: opened\n", argv[2]);
    return 0;
  }
  if (argc >= 3 && strcmp(argv[1], "sem-unlink") == 0) return sem_unlink(argv[2]) == 0 ? 0 : 1;
  if (argc >= 5 && strcmp(argv[1], "futex-ping") == 0) return ping(argv[2], atoi(argv[3]), argv + 4);
  if (argc >= 3 && strcmp(argv[1], "futex-pong") == 0) return pong(argv[2]);
  if (argc >= 3 && strcmp(argv[1], "attach") == 0) return attach(argv[2]);
  fprintf(stderr, "usage: see the comment at the top of tests/container/ns_probe.c\n");
  return 64;
}
