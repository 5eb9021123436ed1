/* An AVX2-only x86 CPU inside one process tree, on a host with AVX-512: the kernel's
 * CPUID faulting (arch_prctl ARCH_SET_CPUID) makes every CPUID instruction raise SIGSEGV;
 * the handler runs the real CPUID and clears the AVX-512, AMX and AVX-VNNI bits before the
 * program sees them. Preloaded (LD_PRELOAD) with TESSEL_CPUID_CAP=avx2, the constructor
 * arms it before the program starts, and child processes, which inherit the environment,
 * arm it again (exec clears the kernel's per-thread CPUID setting). Built and used by
 * benchmarks/avx2_host.py. */
#define _GNU_SOURCE
#include <asm/prctl.h>
#include <cpuid.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

/* leaf 7 subleaf 0: AVX512F DQ IFMA PF ER CD BW VL (ebx); VBMI VBMI2 VNNI BITALG VPOPCNTDQ
 * (ecx); 4VNNIW 4FMAPS VP2INTERSECT AMX-BF16 AVX512-FP16 AMX-TILE AMX-INT8 (edx).
 * leaf 7 subleaf 1: AVX-VNNI, AVX512-BF16, AMX-FP16, AVX-IFMA (eax). */
#define LEAF7_EBX ((1u << 16) | (1u << 17) | (1u << 21) | (1u << 26) | (1u << 27) | \
                   (1u << 28) | (1u << 30) | (1u << 31))
#define LEAF7_ECX ((1u << 1) | (1u << 6) | (1u << 11) | (1u << 12) | (1u << 14))
#define LEAF7_EDX ((1u << 2) | (1u << 3) | (1u << 8) | (1u << 22) | (1u << 23) | \
                   (1u << 24) | (1u << 25))
#define LEAF71_EAX ((1u << 4) | (1u << 5) | (1u << 21) | (1u << 23))

static struct sigaction previous;
static volatile long traps;
static int armed_status = 1; /* 1: never armed; 0: armed; -1: the kernel refused */

static long set_cpuid(int enabled) {
    return syscall(SYS_arch_prctl, ARCH_SET_CPUID, enabled);
}

static void on_segv(int sig, siginfo_t *info, void *raw) {
    (void)sig;
    ucontext_t *context = raw;
    greg_t *regs = context->uc_mcontext.gregs;
    const unsigned char *ip = (const unsigned char *)regs[REG_RIP];
    /* A faulting CPUID is a general-protection fault (SI_KERNEL); a bad address is not,
     * and its instruction pointer may not be readable: only the first is ours. */
    if (info->si_code != SI_KERNEL || ip[0] != 0x0f || ip[1] != 0xa2) {
        /* a real fault: it recurs under the old handler */
        sigaction(SIGSEGV, &previous, 0);
        return;
    }
    unsigned leaf = (unsigned)regs[REG_RAX], sub = (unsigned)regs[REG_RCX];
    unsigned a, b, c, d;
    set_cpuid(1);
    __cpuid_count(leaf, sub, a, b, c, d);
    set_cpuid(0);
    if (leaf == 7 && sub == 0) {
        b &= ~LEAF7_EBX;
        c &= ~LEAF7_ECX;
        d &= ~LEAF7_EDX;
    } else if (leaf == 7 && sub == 1) {
        a &= ~LEAF71_EAX;
    }
    regs[REG_RAX] = a;
    regs[REG_RBX] = b;
    regs[REG_RCX] = c;
    regs[REG_RDX] = d;
    regs[REG_RIP] += 2;
    traps++;
}

/* 0 once CPUID faults into the handler in this thread and the threads it starts. */
int tessel_cpuid_cap_arm(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_segv;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    if (sigaction(SIGSEGV, &action, &previous) != 0) return armed_status = -1;
    return armed_status = set_cpuid(0) == 0 ? 0 : -1;
}

/* 1 while the SIGSEGV handler is still this one (faulthandler, for one, replaces it). */
int tessel_cpuid_cap_handler_installed(void) {
    struct sigaction now;
    if (sigaction(SIGSEGV, 0, &now) != 0) return 0;
    return (now.sa_flags & SA_SIGINFO) && now.sa_sigaction == on_segv;
}

int tessel_cpuid_cap_status(void) { return armed_status; }
long tessel_cpuid_cap_traps(void) { return traps; }

/* What a program sees in leaf 7's ebx (bit 16: AVX512F), through the trap when armed. */
unsigned tessel_cpuid_leaf7_ebx(void) {
    unsigned a, b, c, d;
    __cpuid_count(7, 0, a, b, c, d);
    return b;
}

__attribute__((constructor)) static void arm_when_asked(void) {
    const char *cap = getenv("TESSEL_CPUID_CAP");
    if (cap != 0 && strcmp(cap, "avx2") == 0) tessel_cpuid_cap_arm();
}
