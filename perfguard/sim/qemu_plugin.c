/*
 * perfguard TCG plugin for QEMU 7.2 user mode (plugin API version 1).
 *
 * Counts instruction classes and simulates an L1I / L1D / unified L2 cache hierarchy for
 * the region(s) of interest of a statically linked, non-PIE, unstripped guest, and writes
 * the statistics to a text file when the guest exits.
 *
 * Arguments (each "key=value"):
 *   out=PATH                 required: statistics file (written to a temp name, then renamed)
 *   arch=x86_64|aarch64|riscv64   required: instruction classifier (must match the guest)
 *   l1i_size= l1i_assoc= l1i_line= l1d_size= l1d_assoc= l1d_line= l2_size= l2_assoc= l2_line=
 *                            cache geometries in bytes / ways (default 32K/8/64, 32K/8/64, 1M/16/64)
 *   roi_begin=SYM roi_end=SYM   region-of-interest markers
 *                            (default perfguard_roi_begin / perfguard_roi_end)
 *   dump=PATH                diagnostic: one line per translated instruction with its
 *                            classification (not used by perfguard itself)
 *
 * Output: "perfguard_qemu_plugin 2", then one "key value" line per statistic in the order
 * of perfguard/sim/stats.py STAT_FIELDS (region of interest only), then "roi_count N" and
 * "total_insts N" (whole program), then "blocks N" and N lines of the block profile, one per
 * translated block executed in the region(s): "ADDR_HEX SIZE INSNS COUNT CODE_HEX SYMBOL" (SYMBOL
 * "-" when QEMU knows none; unordered;
 * a block translated twice appears twice: the reader merges and sorts).
 *
 * How counting works
 * ------------------
 * All counters run for the whole program; the region of interest is taken as differences of
 * counter snapshots. The ROI markers are found by address: on the first translation the
 * plugin reads the ELF symbol table of the guest (qemu_plugin_path_to_binary) and looks up
 * the two symbols. A translation block whose first instruction is the entry of the begin
 * (end) function is a marker block; when it executes, before its own counts are added, the
 * plugin snapshots the counters (begin) or adds counters-minus-snapshot to the ROI totals
 * (end). So a region covers everything from the first instruction of the begin function
 * (inclusive: its body, i.e. its return) up to the first instruction of the end function
 * (exclusive: the call to it is included). Nested begins are ignored; an end without a begin
 * is ignored; a region still open at exit is dropped. roi_count counts completed regions.
 *
 * Marginal regions: a guest that defines the symbol perfguard_roi_marginal (perfguard's harness)
 * runs its region twice, first with no kernel call, then with REPS calls. The first region is
 * the region's fixed code (the marker's return, the loop guard, the call to the end marker); the
 * statistics are the second minus the first for every count of executed instructions and
 * accesses (and the block profile), and the second alone for the cache misses and write-backs
 * (whose fixed code is warm by then): R trips of the loop, what the two-run back ends (gem5,
 * cachegrind: REPS=R minus REPS=0 of the same harness) measure too. Such a guest must complete
 * exactly two regions; otherwise no statistics are written and stderr says why.
 * If the binary is not a non-PIE ELF64 with a symbol table, the plugin falls back to
 * comparing qemu_plugin_insn_symbol() of each block's first instruction with the names.
 *
 * Per translation block, one execution callback adds precomputed per-class counts (the
 * classification is done once per instruction at translation, from the disassembly text)
 * and looks up each distinct L1I line the block covers. Every data memory access gets a
 * callback that counts the access into
 * the L1D model; loads/stores are counted once per executed instruction (an instruction
 * whose access QEMU splits into several callbacks counts once; an instruction that both
 * reads and writes counts as one load and one store), using a per-instruction record of
 * the block-execution sequence number at which it last counted.
 *
 * Cache model: LRU, write-back, write-allocate. Each set is a small array ordered from most
 * to least recently used; an entry is (line address << 1) | dirty. L1I and L1D misses are
 * demand accesses to L2 (l2_accesses, l2_misses). A dirty line evicted from L1D is written
 * into L2 (l1d_writebacks; allocating it dirty in L2 if absent, not counted as an L2
 * access); a dirty line evicted from L2 counts l2_writebacks. An access that crosses an L1D
 * line boundary looks up both lines (l1d_accesses counts the access once, misses per line).
 * Caches are never flushed: state carries across region boundaries.
 *
 * The counters are plain globals: the guest must be single-threaded. If it starts a second
 * thread (a second vCPU in user mode), no statistics file is written and stderr says why.
 *
 * Instruction classes (identical meaning on every ISA):
 *   branches          every control-transfer instruction executed (taken or not):
 *                     jumps, conditional branches, calls, returns
 *   cond_branches     conditional branches (x86 jcc/jrcxz/loop*, aarch64 b.cond/cbz/cbnz/
 *                     tbz/tbnz, riscv b* incl. compressed and pseudo forms)
 *   indirect_branches jumps and calls to a register/memory target, excluding returns
 *   calls             direct and indirect calls (x86 call, aarch64 bl/blr*, riscv jal/jalr
 *                     with rd = ra or t0)
 *   returns           x86 ret, aarch64 ret*, riscv jalr/jr with rd = zero and rs1 = ra/t0
 *   fp_insts          scalar floating-point arithmetic, fused multiply-add, square root,
 *                     min/max, rounding, compare, and int<->fp / fp<->fp conversion.
 *                     NOT counted: fp loads/stores, register moves (x86 movss/movsd/movd/movq,
 *                     aarch64 fmov, riscv fmv.*), sign manipulation (aarch64 fabs/fneg,
 *                     riscv fsgnj.* and fabs/fneg, x86 andps/xorps which are vector ops), selects
 *                     (fcsel), and status/rounding-mode accesses. x87 arithmetic counts.
 *   vec_insts         SIMD instructions: x86 any instruction with an xmm/ymm/zmm/mm operand
 *                     other than the scalar-fp and scalar-move ones above (so packed moves,
 *                     broadcasts, shuffles and logic count) plus vzeroupper/vzeroall;
 *                     aarch64 any instruction with a vN.<T>/vN.<T>[i] or qN operand (so ldr q,
 *                     ld1, dup, ins, umov count); riscv every V-extension instruction except
 *                     vsetvl/vsetvli/vsetivli.
 *   vec_fp_insts      the vec_insts doing fp arithmetic in the fp_insts sense (incl.
 *                     FMA, compare, conversion, fp reductions), e.g. vfmadd231ps, fmla
 *                     v0.4s, vfmacc.vv; not vector fp moves/broadcasts/sign ops.
 *   aarch64 words capstone 4 does not decode (Armv8.2 sdot/udot, FP16) are classified from
 *   their encoding (classify_a64_word): sdot/udot count as vec_insts, FP16 arithmetic as
 *   vec_fp_insts (vector) or fp_insts (scalar).
 */

#include <elf.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- The subset of QEMU 7.2's include/qemu/qemu-plugin.h used here (API version 1) ---- */

#define PG_EXPORT __attribute__((visibility("default")))

typedef uint64_t qemu_plugin_id_t;

typedef struct qemu_info_t {
    const char *target_name;
    struct {
        int min;
        int cur;
    } version;
    bool system_emulation;
    union {
        struct {
            int smp_vcpus;
            int max_vcpus;
        } system;
    };
} qemu_info_t;

struct qemu_plugin_tb;
struct qemu_plugin_insn;
typedef uint32_t qemu_plugin_meminfo_t;

enum qemu_plugin_cb_flags {
    QEMU_PLUGIN_CB_NO_REGS,
    QEMU_PLUGIN_CB_R_REGS,
    QEMU_PLUGIN_CB_RW_REGS,
};

enum qemu_plugin_mem_rw {
    QEMU_PLUGIN_MEM_R = 1,
    QEMU_PLUGIN_MEM_W,
    QEMU_PLUGIN_MEM_RW,
};

typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
typedef void (*qemu_plugin_vcpu_simple_cb_t)(qemu_plugin_id_t id, unsigned int vcpu_index);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_vcpu_mem_cb_t)(unsigned int vcpu_index, qemu_plugin_meminfo_t info,
                                          uint64_t vaddr, void *userdata);

void qemu_plugin_register_vcpu_init_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_simple_cb_t cb);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_udata_cb_t cb,
                                            enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb, qemu_plugin_vcpu_udata_cb_t cb,
                                          enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_mem_cb_t cb,
                                      enum qemu_plugin_cb_flags flags, enum qemu_plugin_mem_rw rw,
                                      void *userdata);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
char *qemu_plugin_insn_disas(const struct qemu_plugin_insn *insn);
const char *qemu_plugin_insn_symbol(const struct qemu_plugin_insn *insn);
unsigned int qemu_plugin_mem_size_shift(qemu_plugin_meminfo_t info);
bool qemu_plugin_mem_is_store(qemu_plugin_meminfo_t info);
const char *qemu_plugin_path_to_binary(void);
const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *insn);

PG_EXPORT int qemu_plugin_version = 1;
PG_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv);

/* ---- Counters: indices follow perfguard/sim/stats.py STAT_FIELDS ---- */

enum {
    K_INSTS, K_LOADS, K_STORES, K_BRANCHES, K_COND_BRANCHES, K_INDIRECT_BRANCHES, K_CALLS,
    K_RETURNS, K_FP, K_VEC, K_VEC_FP, K_L1I_ACC, K_L1I_MISS, K_L1D_ACC, K_L1D_MISS, K_L1D_WB,
    K_L2_ACC, K_L2_MISS, K_L2_WB, N_COUNTERS
};

static const char *const counter_names[N_COUNTERS] = {
    "insts", "loads", "stores", "branches", "cond_branches", "indirect_branches", "calls",
    "returns", "fp_insts", "vec_insts", "vec_fp_insts", "l1i_accesses", "l1i_misses",
    "l1d_accesses", "l1d_misses", "l1d_writebacks", "l2_accesses", "l2_misses", "l2_writebacks",
};

/* Classification flags; bit i corresponds to counter K_BRANCHES + i. */
enum {
    F_BR = 1 << 0, F_CBR = 1 << 1, F_IBR = 1 << 2, F_CALL = 1 << 3, F_RET = 1 << 4,
    F_FP = 1 << 5, F_VEC = 1 << 6, F_VECFP = 1 << 7,
};
#define N_CLASSES 8

static uint64_t ctr[N_COUNTERS];

/* Cache misses and write-backs (and L2 accesses, which are L1 misses): in a marginal guest they come
 * from the second region alone, the others are the second region minus the first. */
static bool is_miss(int k)
{
    return k == K_L1I_MISS || k == K_L1D_MISS || k == K_L1D_WB || k == K_L2_ACC || k == K_L2_MISS || k == K_L2_WB;
}
static uint64_t roi_total[N_COUNTERS];
static uint64_t roi_snap[N_COUNTERS];
static uint64_t roi_count;
static bool in_roi;
static bool marginal;                 /* the guest defines perfguard_roi_marginal */
static uint64_t fixed[N_COUNTERS];    /* marginal: the first region's counts */
static bool fixed_done;
static uint64_t exec_seq; /* incremented at every translation-block execution */
static bool multithreaded; /* the guest started a second thread (vCPU): counts are unusable */

/* ---- Configuration ---- */

enum arch { ARCH_X86_64, ARCH_AARCH64, ARCH_RISCV64 };

static enum arch arch;
static const char *out_path;
static const char *dump_path;
static FILE *dump_file;
static const char *roi_begin_name = "perfguard_roi_begin";
static const char *roi_end_name = "perfguard_roi_end";
static const char *marginal_name = "perfguard_roi_marginal";
static uint64_t roi_begin_addr, roi_end_addr;
static bool syms_resolved, roi_by_name;

/* ---- Cache model ---- */

#define INVALID_ENTRY UINT64_MAX

struct cache {
    uint64_t *e;       /* sets * assoc entries, each set ordered MRU first */
    uint64_t set_mask; /* sets - 1 */
    unsigned assoc;
    unsigned shift;    /* log2(line) */
};

static struct cache l1i, l1d, l2;

/* Look up `line` (line address), making it MRU; on a miss install it and store the evicted
 * entry in *victim (INVALID_ENTRY if none). `dirty` (0/1) is or-ed into the entry. */
static inline bool cache_access(struct cache *c, uint64_t line, uint64_t dirty, uint64_t *victim)
{
    uint64_t *s = c->e + (line & c->set_mask) * c->assoc;
    uint64_t key = line << 1;
    if ((s[0] & ~1ULL) == key) {
        s[0] |= dirty;
        return true;
    }
    unsigned n = c->assoc;
    for (unsigned i = 1; i < n; i++) {
        if ((s[i] & ~1ULL) == key) {
            uint64_t v = s[i] | dirty;
            memmove(s + 1, s, i * sizeof *s);
            s[0] = v;
            return true;
        }
    }
    *victim = s[n - 1];
    memmove(s + 1, s, (n - 1) * sizeof *s);
    s[0] = key | dirty;
    return false;
}

/* Write one L2 line (a writeback from L1D): allocate dirty, count a dirty L2 victim. */
static void l2_write_line(uint64_t line)
{
    uint64_t victim;
    if (!cache_access(&l2, line, 1, &victim) && victim != INVALID_ENTRY && (victim & 1))
        ctr[K_L2_WB]++;
}

/* Demand fill of the L1 line `l1line` (L1 line size 1 << l1shift) from L2. */
static void l2_demand(uint64_t l1line, unsigned l1shift)
{
    uint64_t first = (l1line << l1shift) >> l2.shift;
    uint64_t last = (((l1line + 1) << l1shift) - 1) >> l2.shift;
    bool missed = false;
    ctr[K_L2_ACC]++;
    for (uint64_t line = first; line <= last; line++) {
        uint64_t victim;
        if (!cache_access(&l2, line, 0, &victim)) {
            missed = true;
            if (victim != INVALID_ENTRY && (victim & 1))
                ctr[K_L2_WB]++;
        }
    }
    if (missed)
        ctr[K_L2_MISS]++;
}

static void l1d_line(uint64_t line, uint64_t dirty)
{
    uint64_t victim;
    if (cache_access(&l1d, line, dirty, &victim))
        return;
    ctr[K_L1D_MISS]++;
    l2_demand(line, l1d.shift);
    if (victim != INVALID_ENTRY && (victim & 1)) {
        uint64_t vline = victim >> 1;
        uint64_t first = (vline << l1d.shift) >> l2.shift;
        uint64_t last = (((vline + 1) << l1d.shift) - 1) >> l2.shift;
        ctr[K_L1D_WB]++;
        for (uint64_t l = first; l <= last; l++)
            l2_write_line(l);
    }
}

static inline void l1d_access(uint64_t vaddr, unsigned size, uint64_t dirty)
{
    uint64_t first = vaddr >> l1d.shift;
    uint64_t last = (vaddr + size - 1) >> l1d.shift;
    ctr[K_L1D_ACC]++;
    /* fast path: MRU hit */
    uint64_t *s = l1d.e + (first & l1d.set_mask) * l1d.assoc;
    if (__builtin_expect(first == last && (s[0] & ~1ULL) == first << 1, 1)) {
        s[0] |= dirty;
        return;
    }
    for (uint64_t line = first; line <= last; line++)
        l1d_line(line, dirty);
}

static inline void l1i_line(uint64_t line)
{
    uint64_t victim;
    uint64_t *s = l1i.e + (line & l1i.set_mask) * l1i.assoc;
    if (__builtin_expect((s[0] >> 1) == line, 1))
        return;
    if (cache_access(&l1i, line, 0, &victim))
        return;
    ctr[K_L1I_MISS]++;
    l2_demand(line, l1i.shift);
}

/* ---- Per-block and per-instruction records ---- */

struct insn_rec {
    uint64_t load_seq;  /* exec_seq at which this instruction last counted a load */
    uint64_t store_seq; /* ... a store */
};

enum { MARK_NONE, MARK_BEGIN, MARK_END };

/* Block profile: one record per translated block (and per page-crossing tail instruction).
 * The execution callback only increments `execs` (no test on the hot path); the region markers
 * move counts: at a begin every record's `execs` is remembered in `snap`, at an end
 * `execs - snap` is added to `done`. Executions of a region still open at exit are dropped,
 * like the statistics, so the profile covers exactly the instructions the ROI counters count.
 * A marker costs one pass over the records (a few thousand), once per region. */
struct block_rec {
    uint64_t execs; /* every execution (hot: next to the counters the callback reads) */
    uint64_t snap, done, fixed; /* fixed: executions in a marginal guest's first region */
    uint64_t addr;
    uint32_t size, n_insns;
    unsigned char *code; /* the block's bytes, for a pipeline model that has no binary */
    const char *symbol;  /* the function it starts in (QEMU's lookup), NULL if unknown */
    struct block_rec *next;
};

static struct block_rec *blocks;

static void blocks_region_begin(void)
{
    for (struct block_rec *b = blocks; b; b = b->next)
        b->snap = b->execs;
}

static void blocks_region_end(bool first_of_marginal)
{
    for (struct block_rec *b = blocks; b; b = b->next) {
        if (first_of_marginal)
            b->fixed = b->execs - b->snap;
        else
            b->done += b->execs - b->snap;
    }
}

/* Records live inside their tb_rec / tail_rec, after the fields the execution callback reads,
 * so `execs` shares their cache line; the list links them for the output and the markers. */
static void block_init(struct block_rec *b, uint64_t addr, struct qemu_plugin_insn *first)
{
    b->addr = addr;
    b->symbol = qemu_plugin_insn_symbol(first);
    b->next = blocks;
    blocks = b;
}

/* Zeroed and cache-line aligned: a record's hot fields and its `execs` share one line. */
static void *record_alloc(size_t size)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, size) != 0 || !p) {
        fprintf(stderr, "perfguard plugin: out of memory\n");
        abort();
    }
    memset(p, 0, size);
    return p;
}

/* The last instruction of a block that runs over a page end is counted on its own: QEMU 7.2
 * drops it from the block after translation (it is translated again at the start of the
 * next block), so counting it with the block would count an instruction that never ran. Its
 * own exec callback goes away with it. */
struct tail_rec {
    uint64_t first_line;
    uint32_t n_lines;
    uint32_t any_class;
    uint32_t cls[N_CLASSES];
    struct block_rec block;
};

struct tb_rec {
    uint64_t first_line; /* first L1I line covered */
    uint32_t n_lines;    /* distinct L1I lines covered */
    uint32_t n_insns;
    uint32_t marker;
    uint32_t any_class;
    uint32_t cls[N_CLASSES];
    struct block_rec block;
    struct insn_rec insns[];
};

static void roi_marker(uint32_t marker)
{
    if (marker == MARK_BEGIN) {
        if (!in_roi) {
            memcpy(roi_snap, ctr, sizeof ctr);
            in_roi = true;
            blocks_region_begin();
        }
    } else if (in_roi) {
        bool first = marginal && !fixed_done;
        for (int k = 0; k < N_COUNTERS; k++) {
            if (first)
                fixed[k] = ctr[k] - roi_snap[k];
            else
                roi_total[k] += ctr[k] - roi_snap[k];
        }
        blocks_region_end(first);
        if (first)
            fixed_done = true;
        else
            roi_count++;
        in_roi = false;
    }
}

static void tb_exec(unsigned int vcpu_index, void *userdata)
{
    struct tb_rec *t = userdata;
    (void)vcpu_index;
    if (__builtin_expect(t->marker != MARK_NONE, 0))
        roi_marker(t->marker);
    t->block.execs++;
    exec_seq++;
    ctr[K_INSTS] += t->n_insns;
    ctr[K_L1I_ACC] += t->n_insns;
    if (t->any_class) {
        for (int i = 0; i < N_CLASSES; i++)
            ctr[K_BRANCHES + i] += t->cls[i];
    }
    uint64_t line = t->first_line;
    for (uint32_t i = 0; i < t->n_lines; i++, line++)
        l1i_line(line);
}

/* One callback for every access: QEMU 7.2 does not filter memory callbacks by the
 * registered direction reliably (a callback registered for QEMU_PLUGIN_MEM_W also fired
 * on loads), so the direction comes from the meminfo. */
static void mem_cb(unsigned int vcpu_index, qemu_plugin_meminfo_t info, uint64_t vaddr, void *userdata)
{
    struct insn_rec *r = userdata;
    unsigned size = 1u << qemu_plugin_mem_size_shift(info);
    (void)vcpu_index;
    if (qemu_plugin_mem_is_store(info)) {
        if (r->store_seq != exec_seq) {
            r->store_seq = exec_seq;
            ctr[K_STORES]++;
        }
        l1d_access(vaddr, size, 1);
    } else {
        if (r->load_seq != exec_seq) {
            r->load_seq = exec_seq;
            ctr[K_LOADS]++;
        }
        l1d_access(vaddr, size, 0);
    }
}

/* ---- Instruction classifier (from the disassembly text) ---- */

static bool starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static bool ends(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static bool in_list(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(s, *list) == 0)
            return true;
    return false;
}

static bool starts_any(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (starts(s, *list))
            return true;
    return false;
}

/* x86 (capstone, AT&T syntax: "vfmadd231ps (%rax, %rdi), %ymm2, %ymm0", "callq *%rax") */
static unsigned classify_x86(const char *mn, const char *ops)
{
    static const char *const jumps[] = {"jmp", "jmpq", "jmpl", "jmpw", "ljmp", "ljmpq", "ljmpl", NULL};
    static const char *const packed_fp[] = {
        "add", "sub", "mul", "div", "sqrt", "min", "max", "rcp", "rsqrt", "round", "cmp",
        "fmadd", "fmsub", "fnmadd", "fnmsub", "hadd", "hsub", "dp", NULL};
    static const char *const x87[] = {
        "fadd", "fiadd", "fsub", "fisub", "fmul", "fimul", "fdiv", "fidiv", "fsqrt", "fcom",
        "ficom", "fucom", "ftst", "fprem", "frndint", "fscale", "fsin", "fcos", "fptan",
        "fpatan", "f2xm1", "fyl2x", "fxtract", "fild", "fist", NULL};
    bool indirect = ops[0] == '*';

    if (mn[0] == 'j') {
        if (in_list(mn, jumps))
            return F_BR | (indirect ? F_IBR : 0);
        return F_BR | F_CBR; /* jcc, jcxz/jecxz/jrcxz */
    }
    if (starts(mn, "ljmp"))
        return F_BR | (indirect ? F_IBR : 0);
    if (starts(mn, "loop"))
        return F_BR | F_CBR;
    if (starts(mn, "call") || starts(mn, "lcall"))
        return F_BR | F_CALL | (indirect ? F_IBR : 0);
    if (starts(mn, "ret") || starts(mn, "lret"))
        return F_BR | F_RET;
    if (strcmp(mn, "vzeroupper") == 0 || strcmp(mn, "vzeroall") == 0)
        return F_VEC;

    bool vreg = strstr(ops, "%xmm") || strstr(ops, "%ymm") || strstr(ops, "%zmm") || strstr(ops, "%mm");
    if (vreg) {
        const char *b = mn[0] == 'v' ? mn + 1 : mn;
        /* scalar register/memory moves: not counted */
        if (strcmp(b, "movss") == 0 || strcmp(b, "movsd") == 0 || strcmp(b, "movd") == 0 ||
            strcmp(b, "movq") == 0)
            return 0;
        if (starts(b, "cvt")) {
            if (strstr(b, "ss2") || strstr(b, "sd2") || strstr(b, "2ss") || strstr(b, "2sd"))
                return F_FP;
            return F_VEC | F_VECFP; /* packed conversions */
        }
        if (b[0] != 'p' && !starts(b, "mov") && !starts(b, "broadcast") &&
            (ends(b, "ss") || ends(b, "sd")))
            return F_FP; /* scalar SSE/AVX arithmetic, FMA, compare */
        if (starts_any(b, packed_fp) && (ends(b, "ps") || ends(b, "pd")))
            return F_VEC | F_VECFP;
        return F_VEC;
    }
    if (mn[0] == 'f' && starts_any(mn, x87))
        return F_FP;
    return 0;
}

/* Is `ops` using an aarch64 SIMD register operand: vN.<T>, vN.<T>[i] (also inside {...})
 * or qN? */
static bool a64_vec_operand(const char *ops)
{
    for (const char *p = ops; *p; p++) {
        if ((*p == 'v' || *p == 'q') && (p == ops || p[-1] == ' ' || p[-1] == '{' || p[-1] == ',') &&
            p[1] >= '0' && p[1] <= '9') {
            const char *q = p + 1;
            while (*q >= '0' && *q <= '9')
                q++;
            if (*p == 'v' && *q == '.')
                return true;
            if (*p == 'q' && (*q == '\0' || *q == ',' || *q == ' ' || *q == ']' || *q == '}'))
                return true;
        }
    }
    return false;
}

/* aarch64 words capstone 4 cannot decode (it prints ".byte 0x12, 0x94, 0x95, 0x0e"): Armv8.2's
 * dot product (sdot/udot) and half-precision arithmetic, classified from the encoding. The
 * Advanced SIMD vector groups have bit 31 = 0, bit 28 = 0, bits 27:25 = 111. */
static unsigned classify_a64_word(uint32_t w)
{
    if ((w & 0x0e000000) != 0x0e000000)
        return 0; /* not SIMD & FP data processing */
    if (!(w & 0x80000000) && !(w & 0x10000000)) {
        bool fp16 = (w & 0x9f60c400) == 0x0e400400 || /* three same (FP16): fmla, fadd, fmul, ... */
                    (w & 0x9f7e0c00) == 0x0e780800 || /* two-register misc (FP16) */
                    (w & 0x9fc00400) == 0x0f000000;   /* by element, size 00: fmla/fmul .h[i] */
        return F_VEC | (fp16 ? F_VECFP : 0);        /* sdot/udot and the rest: integer vector */
    }
    if ((w & 0x5e000000) == 0x1e000000 && ((w >> 22) & 3) == 3)
        return F_FP; /* scalar floating point (1-3 sources, compare, convert) on half precision (type 11) */
    return 0;
}

/* aarch64 (capstone: "fmla v0.4s, v2.4s, v5.4s", "b.ne #0x400848", "ldr q2, [x13, x11]") */
static unsigned classify_a64(const char *mn, const char *ops)
{
    if (strcmp(mn, ".byte") == 0) {
        unsigned b[4];
        if (sscanf(ops, "%x, %x, %x, %x", &b[0], &b[1], &b[2], &b[3]) == 4)
            return classify_a64_word(b[0] | b[1] << 8 | b[2] << 16 | (uint32_t)b[3] << 24);
        return 0;
    }
    static const char *const blr[] = {"blr", "blraa", "blraaz", "blrab", "blrabz", NULL};
    static const char *const br[] = {"br", "braa", "braaz", "brab", "brabz", NULL};
    static const char *const ret[] = {"ret", "retaa", "retab", NULL};
    static const char *const cbr[] = {"cbz", "cbnz", "tbz", "tbnz", NULL};
    static const char *const fp_not_arith[] = {"fmov", "fabs", "fneg", "fcsel", NULL};

    if (strcmp(mn, "b") == 0)
        return F_BR;
    if (starts(mn, "b."))
        return F_BR | F_CBR;
    if (in_list(mn, cbr))
        return F_BR | F_CBR;
    if (strcmp(mn, "bl") == 0)
        return F_BR | F_CALL;
    if (in_list(mn, blr))
        return F_BR | F_CALL | F_IBR;
    if (in_list(mn, br))
        return F_BR | F_IBR;
    if (in_list(mn, ret))
        return F_BR | F_RET;

    bool fp_arith = (mn[0] == 'f' && !in_list(mn, fp_not_arith)) || strcmp(mn, "scvtf") == 0 ||
                    strcmp(mn, "ucvtf") == 0;
    if (a64_vec_operand(ops))
        return F_VEC | (fp_arith ? F_VECFP : 0);
    return fp_arith ? F_FP : 0;
}

static bool rv_link(const char *reg)
{
    return strcmp(reg, "ra") == 0 || strcmp(reg, "t0") == 0 || strcmp(reg, "x1") == 0 ||
           strcmp(reg, "x5") == 0;
}

static bool rv_zero(const char *reg)
{
    return strcmp(reg, "zero") == 0 || strcmp(reg, "x0") == 0;
}

/* riscv64 (QEMU's disassembler, after the hex encoding: "jal ra,336", "jalr ra,a5,0",
 * "fmadd.s dyn,fa4,fa4,fa2,fa5", "vfmacc.vv v3,v1,v2"; compressed forms print without c.) */
static unsigned classify_rv(const char *mn, const char *ops)
{
    static const char *const cbr[] = {
        "beq", "bne", "blt", "bge", "bltu", "bgeu", "beqz", "bnez", "blez", "bgez", "bltz",
        "bgtz", "bgt", "ble", "bgtu", "bleu", "c.beqz", "c.bnez", NULL};
    static const char *const fp_arith[] = {
        "fadd", "fsub", "fmul", "fdiv", "fsqrt", "fmin", "fmax", "fmadd", "fmsub", "fnmadd",
        "fnmsub", "fcvt", "feq", "flt", "fle", "fgt", "fge", "fclass", NULL};
    static const char *const vec_fp_arith[] = {
        "vfadd", "vfsub", "vfrsub", "vfwadd", "vfwsub", "vfmul", "vfwmul", "vfdiv", "vfrdiv",
        "vfsqrt", "vfrsqrt7", "vfrec7", "vfmin", "vfmax", "vfmacc", "vfnmacc", "vfmsac",
        "vfnmsac", "vfmadd", "vfnmadd", "vfmsub", "vfnmsub", "vfwmacc", "vfwnmacc", "vfwmsac",
        "vfwnmsac", "vfcvt", "vfwcvt", "vfncvt", "vfredusum", "vfredosum", "vfredsum",
        "vfredmin", "vfredmax", "vfwredusum", "vfwredosum", "vfwredsum", "vmfeq", "vmfne",
        "vmflt", "vmfle", "vmfgt", "vmfge", "vfclass", NULL};
    char regs[3][16] = {{0}};
    int nregs = 0;
    {
        const char *p = ops;
        while (*p && nregs < 3) {
            size_t len = strcspn(p, ",(");
            if (len >= sizeof regs[0])
                len = sizeof regs[0] - 1;
            memcpy(regs[nregs], p, len);
            regs[nregs][len] = '\0';
            nregs++;
            p += strcspn(p, ",");
            if (*p == ',')
                p++;
        }
    }
    char base[32];
    size_t blen = strcspn(mn, ".");
    if (blen >= sizeof base)
        blen = sizeof base - 1;
    memcpy(base, mn, blen);
    base[blen] = '\0';

    if (in_list(mn, cbr))
        return F_BR | F_CBR;
    if (strcmp(mn, "j") == 0 || strcmp(mn, "c.j") == 0)
        return F_BR;
    if (strcmp(mn, "jal") == 0 || strcmp(mn, "c.jal") == 0) {
        if (nregs <= 1 || rv_link(regs[0]))
            return F_BR | F_CALL; /* "jal offset" has rd = ra */
        return F_BR;
    }
    if (strcmp(mn, "ret") == 0)
        return F_BR | F_RET;
    if (strcmp(mn, "jr") == 0 || strcmp(mn, "c.jr") == 0)
        return F_BR | (rv_link(regs[0]) ? F_RET : F_IBR);
    if (strcmp(mn, "jalr") == 0 || strcmp(mn, "c.jalr") == 0) {
        if (nregs <= 1)
            return F_BR | F_CALL | F_IBR; /* "jalr rs" has rd = ra */
        if (rv_link(regs[0]))
            return F_BR | F_CALL | F_IBR;
        if (rv_zero(regs[0]) && rv_link(regs[1]))
            return F_BR | F_RET;
        return F_BR | F_IBR;
    }
    if (mn[0] == 'v') {
        if (starts(mn, "vsetvl") || starts(mn, "vsetivl"))
            return 0;
        return F_VEC | (in_list(base, vec_fp_arith) ? F_VECFP : 0);
    }
    if (mn[0] == 'f' && mn[blen] == '.' && in_list(base, fp_arith))
        return F_FP;
    return 0;
}

/* Split a disassembly string into mnemonic and operands and classify it. */
static unsigned classify(const char *disas)
{
    char buf[256];
    char *p, *mn, *ops;
    snprintf(buf, sizeof buf, "%s", disas ? disas : "");
    p = buf;
    while (*p == ' ' || *p == '\t')
        p++;
    if (arch == ARCH_RISCV64) { /* skip the raw hex encoding */
        p += strspn(p, "0123456789abcdefABCDEF");
        while (*p == ' ' || *p == '\t')
            p++;
    }
    for (;;) {
        mn = p;
        p += strcspn(p, " \t");
        if (*p)
            *p++ = '\0';
        while (*p == ' ' || *p == '\t')
            p++;
        /* x86 prefixes: classify the instruction they prefix */
        static const char *const prefixes[] = {
            "rep", "repz", "repe", "repne", "repnz", "lock", "notrack", "bnd", "data16",
            "addr32", "xacquire", "xrelease", NULL};
        if (arch == ARCH_X86_64 && *p && in_list(mn, prefixes))
            continue;
        break;
    }
    ops = p;
    /* trim trailing blanks and a "# comment" */
    char *hash = strchr(ops, '#');
    if (hash && arch == ARCH_RISCV64)
        *hash = '\0';
    size_t n = strlen(ops);
    while (n && (ops[n - 1] == ' ' || ops[n - 1] == '\t'))
        ops[--n] = '\0';
    switch (arch) {
    case ARCH_X86_64:
        return classify_x86(mn, ops);
    case ARCH_AARCH64:
        return classify_a64(mn, ops);
    default:
        return classify_rv(mn, ops);
    }
}

/* ---- ROI symbol lookup in the guest ELF ---- */

static void resolve_roi_symbols(void)
{
    const char *path = qemu_plugin_path_to_binary();
    FILE *f = path ? fopen(path, "rb") : NULL;
    unsigned char *img = NULL;
    long size = 0;
    bool found_begin = false, found_end = false, usable = false;

    syms_resolved = true;
    if (f && fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) > (long)sizeof(Elf64_Ehdr) &&
        fseek(f, 0, SEEK_SET) == 0 && (img = malloc(size)) && fread(img, 1, size, f) == (size_t)size) {
        const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
        if (memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_ident[EI_CLASS] == ELFCLASS64 &&
            eh->e_ident[EI_DATA] == ELFDATA2LSB && eh->e_type == ET_EXEC &&
            eh->e_shoff && eh->e_shentsize == sizeof(Elf64_Shdr) &&
            eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) <= (uint64_t)size) {
            const Elf64_Shdr *sh = (const Elf64_Shdr *)(img + eh->e_shoff);
            usable = true;
            for (unsigned i = 0; i < eh->e_shnum; i++) {
                if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum ||
                    sh[i].sh_entsize != sizeof(Elf64_Sym))
                    continue;
                const Elf64_Shdr *strsh = &sh[sh[i].sh_link];
                if (sh[i].sh_offset + sh[i].sh_size > (uint64_t)size ||
                    strsh->sh_offset + strsh->sh_size > (uint64_t)size)
                    continue;
                const Elf64_Sym *sym = (const Elf64_Sym *)(img + sh[i].sh_offset);
                const char *strtab = (const char *)(img + strsh->sh_offset);
                size_t nsym = sh[i].sh_size / sizeof(Elf64_Sym);
                for (size_t j = 0; j < nsym; j++) {
                    if (sym[j].st_name >= strsh->sh_size || sym[j].st_shndx == SHN_UNDEF)
                        continue;
                    const char *name = strtab + sym[j].st_name;
                    if (strcmp(name, marginal_name) == 0)
                        marginal = true;
                    if (!found_begin && strcmp(name, roi_begin_name) == 0) {
                        roi_begin_addr = sym[j].st_value;
                        found_begin = true;
                    } else if (!found_end && strcmp(name, roi_end_name) == 0) {
                        roi_end_addr = sym[j].st_value;
                        found_end = true;
                    }
                }
            }
        }
    }
    free(img);
    if (f)
        fclose(f);
    if (usable && found_begin && found_end) {
        if (roi_begin_addr == roi_end_addr) {
            fprintf(stderr, "perfguard plugin: %s and %s share address 0x%" PRIx64
                    " (identical functions were merged): make their bodies differ\n",
                    roi_begin_name, roi_end_name, roi_begin_addr);
            roi_begin_addr = roi_end_addr = 0;
        }
        return;
    }
    if (usable) {
        fprintf(stderr, "perfguard plugin: %s%s%s not found in the symbol table of %s\n",
                found_begin ? "" : roi_begin_name, !found_begin && !found_end ? " and " : "",
                found_end ? "" : roi_end_name, path);
        return;
    }
    roi_by_name = true; /* PIE or unreadable: fall back to names from QEMU's symbol lookup */
}

/* ---- Translation ---- */

static void flags_text(unsigned f, char *out)
{
    static const char letters[N_CLASSES] = {'B', 'C', 'I', 'L', 'R', 'F', 'V', 'X'};
    int n = 0;
    for (int i = 0; i < N_CLASSES; i++)
        if (f & (1u << i))
            out[n++] = letters[i];
    if (!n)
        out[n++] = '-';
    out[n] = '\0';
}

static void tail_exec(unsigned int vcpu_index, void *userdata)
{
    struct tail_rec *r = userdata;
    (void)vcpu_index;
    r->block.execs++;
    ctr[K_INSTS]++;
    ctr[K_L1I_ACC]++;
    if (r->any_class) {
        for (int i = 0; i < N_CLASSES; i++)
            ctr[K_BRANCHES + i] += r->cls[i];
    }
    uint64_t line = r->first_line;
    for (uint32_t i = 0; i < r->n_lines; i++, line++)
        l1i_line(line);
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    size_t n = qemu_plugin_tb_n_insns(tb);
    (void)id;
    if (!syms_resolved)
        resolve_roi_symbols();
    if (n == 0)
        return;
    struct tb_rec *t = record_alloc(sizeof *t + n * sizeof(struct insn_rec));
    uint64_t start = qemu_plugin_tb_vaddr(tb), end = start + 1;
    t->n_insns = (uint32_t)n;
    block_init(&t->block, start, qemu_plugin_tb_get_insn(tb, 0));
    size_t code_len = 0;
    for (size_t i = 0; i < n; i++)
        code_len += qemu_plugin_insn_size(qemu_plugin_tb_get_insn(tb, i));
    t->block.code = malloc(code_len ? code_len : 1);
    if (!t->block.code) {
        fprintf(stderr, "perfguard plugin: out of memory\n");
        abort();
    }
    code_len = 0;
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        uint64_t va = qemu_plugin_insn_vaddr(insn);
        size_t sz = qemu_plugin_insn_size(insn);
        if (va + sz > end)
            end = va + sz;
        if (i == 0) {
            if (roi_by_name) {
                const char *sym = qemu_plugin_insn_symbol(insn);
                if (sym && strcmp(sym, roi_begin_name) == 0)
                    t->marker = MARK_BEGIN;
                else if (sym && strcmp(sym, roi_end_name) == 0)
                    t->marker = MARK_END;
            } else if (roi_begin_addr && va == roi_begin_addr) {
                t->marker = MARK_BEGIN;
            } else if (roi_end_addr && va == roi_end_addr) {
                t->marker = MARK_END;
            }
        } else if (!roi_by_name && ((roi_begin_addr && va == roi_begin_addr) ||
                                    (roi_end_addr && va == roi_end_addr))) {
            fprintf(stderr, "perfguard plugin: a block enters an ROI marker function at 0x%" PRIx64
                    " without a call; region boundaries may be inexact\n", va);
        }
        char *d = qemu_plugin_insn_disas(insn);
        unsigned f = classify(d);
        /* QEMU 7.2 stops decoding an instruction that would need the next page when it is not
         * the first of its block, and ends the block before it; the plugin still gets it, with
         * the bytes read so far (up to 15 short of the page end, so the disassembler cannot
         * decode it: ".byte"). It runs in the next block, not in this one. An instruction whose
         * bytes do run over the end counts too. */
        bool at_page_end = (-(va + sz) & 4095) < 16 && d && strstr(d, ".byte");
        bool crosses_page = i > 0 && i == n - 1 && (at_page_end || (va >> 12) != ((va + sz - 1) >> 12));
        if (crosses_page) {
            struct tail_rec *r = record_alloc(sizeof *r);
            r->first_line = va >> l1i.shift;
            r->n_lines = (uint32_t)(((va + sz - 1) >> l1i.shift) - r->first_line + 1);
            for (int c = 0; c < N_CLASSES; c++)
                if (f & (1u << c))
                    r->cls[c]++;
            r->any_class = f;
            block_init(&r->block, va, insn);
            r->block.n_insns = 1;
            r->block.size = (uint32_t)sz;
            r->block.code = malloc(sz ? sz : 1);
            if (!r->block.code) {
                fprintf(stderr, "perfguard plugin: out of memory\n");
                abort();
            }
            memcpy(r->block.code, qemu_plugin_insn_data(insn), sz);
            t->n_insns--;
            end = va > start ? va : start + 1;
            qemu_plugin_register_vcpu_insn_exec_cb(insn, tail_exec, QEMU_PLUGIN_CB_NO_REGS, r);
        } else {
            for (int c = 0; c < N_CLASSES; c++)
                if (f & (1u << c))
                    t->cls[c]++;
            t->any_class |= f;
            memcpy(t->block.code + code_len, qemu_plugin_insn_data(insn), sz);
            code_len += sz;
        }
        if (dump_file) {
            char ft[N_CLASSES + 2];
            flags_text(f, ft);
            fprintf(dump_file, "%" PRIx64 "\t%s\t%s\n", va, ft, d ? d : "");
        }
        free(d);
        qemu_plugin_register_vcpu_mem_cb(insn, mem_cb, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW,
                                         &t->insns[i]);
    }
    t->first_line = start >> l1i.shift;
    t->n_lines = (uint32_t)(((end - 1) >> l1i.shift) - t->first_line + 1);
    t->block.n_insns = t->n_insns;
    t->block.size = (uint32_t)code_len;
    qemu_plugin_register_vcpu_tb_exec_cb(tb, tb_exec, QEMU_PLUGIN_CB_NO_REGS, t);
}

/* ---- Output ---- */

static void vcpu_init(qemu_plugin_id_t id, unsigned int vcpu_index)
{
    (void)id;
    if (vcpu_index > 0)
        multithreaded = true;
}

static void write_stats(qemu_plugin_id_t id, void *userdata)
{
    (void)id;
    (void)userdata;
    if (dump_file) {
        fclose(dump_file);
        dump_file = NULL;
    }
    if (multithreaded) {
        fprintf(stderr, "perfguard plugin: the guest started more than one thread; "
                "statistics need a single-threaded guest (none written)\n");
        return;
    }
    if (marginal && (!fixed_done || roi_count != 1)) {
        fprintf(stderr, "perfguard plugin: the guest defines %s but completed %" PRIu64 " region(s), not two "
                "(one with no kernel call, then one with the calls); statistics need both (none written)\n",
                marginal_name, roi_count + fixed_done);
        return;
    }
    for (int k = 0; k < N_COUNTERS; k++) {
        if (!is_miss(k) && fixed[k] > roi_total[k]) {
            fprintf(stderr, "perfguard plugin: %s: the region without kernel calls counted more (%" PRIu64
                    ") than the one with them (%" PRIu64 ") (none written)\n", counter_names[k], fixed[k], roi_total[k]);
            return;
        }
    }
    for (struct block_rec *b = blocks; b; b = b->next) {
        if (b->fixed > b->done) {
            fprintf(stderr, "perfguard plugin: block 0x%" PRIx64 " ran %" PRIu64 " times without kernel calls and %"
                    PRIu64 " with them: the two regions do not share their fixed code (none written)\n",
                    b->addr, b->fixed, b->done);
            return;
        }
    }
    size_t len = strlen(out_path) + 32;
    char *tmp = malloc(len);
    if (!tmp)
        return;
    snprintf(tmp, len, "%s.tmp.%ld", out_path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "perfguard plugin: cannot write %s: %s\n", tmp, strerror(errno));
        free(tmp);
        return;
    }
    fprintf(f, "perfguard_qemu_plugin 2\n");
    for (int k = 0; k < N_COUNTERS; k++)
        fprintf(f, "%s %" PRIu64 "\n", counter_names[k], roi_total[k] - (is_miss(k) ? 0 : fixed[k]));
    fprintf(f, "roi_count %" PRIu64 "\n", roi_count);
    fprintf(f, "total_insts %" PRIu64 "\n", ctr[K_INSTS]);
    uint64_t n_blocks = 0;
    for (struct block_rec *b = blocks; b; b = b->next)
        n_blocks += b->done != b->fixed;
    fprintf(f, "blocks %" PRIu64 "\n", n_blocks);
    for (struct block_rec *b = blocks; b; b = b->next) {
        uint64_t count = b->done - b->fixed;
        if (!count)
            continue;
        fprintf(f, "%" PRIx64 " %" PRIu32 " %" PRIu32 " %" PRIu64 " ", b->addr, b->size, b->n_insns, count);
        for (uint32_t i = 0; i < b->size; i++)
            fprintf(f, "%02x", b->code[i]);
        /* a name the reader can split on: no blanks, never empty */
        fputc(' ', f);
        const char *sym = b->symbol && *b->symbol ? b->symbol : "-";
        for (; *sym; sym++)
            fputc((*sym > ' ' && *sym < 127) ? *sym : '?', f);
        fputc('\n', f);
    }
    if (fclose(f) != 0 || rename(tmp, out_path) != 0) {
        fprintf(stderr, "perfguard plugin: cannot write %s: %s\n", out_path, strerror(errno));
        unlink(tmp);
    }
    free(tmp);
}

/* ---- Installation ---- */

static bool parse_u64(const char *s, uint64_t *out)
{
    char *end;
    if (!*s || *s < '0' || *s > '9')
        return false;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return false;
    *out = v;
    return true;
}

static bool pow2(uint64_t v)
{
    return v && !(v & (v - 1));
}

static bool cache_init(struct cache *c, const char *name, uint64_t size, uint64_t assoc, uint64_t line)
{
    if (!size || !assoc || !pow2(line) || line < 4 || assoc > 4096 || size % (assoc * line) ||
        !pow2(size / (assoc * line))) {
        fprintf(stderr, "perfguard plugin: bad %s geometry: size=%" PRIu64 " assoc=%" PRIu64
                " line=%" PRIu64 " (need line a power of two, size/(assoc*line) sets a power of two)\n",
                name, size, assoc, line);
        return false;
    }
    uint64_t sets = size / (assoc * line);
    c->assoc = (unsigned)assoc;
    c->set_mask = sets - 1;
    c->shift = (unsigned)__builtin_ctzll(line);
    c->e = malloc(sets * assoc * sizeof *c->e);
    if (!c->e) {
        fprintf(stderr, "perfguard plugin: out of memory for %s\n", name);
        return false;
    }
    for (uint64_t i = 0; i < sets * assoc; i++)
        c->e[i] = INVALID_ENTRY;
    return true;
}

PG_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
    static const char *const geo_keys[9] = {
        "l1i_size", "l1i_assoc", "l1i_line", "l1d_size", "l1d_assoc", "l1d_line",
        "l2_size", "l2_assoc", "l2_line"};
    uint64_t geo[9] = {32768, 8, 64, 32768, 8, 64, 1048576, 16, 64};
    const char *arch_name = NULL;

    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *eq = strchr(a, '=');
        if (!eq) {
            fprintf(stderr, "perfguard plugin: argument '%s' is not key=value\n", a);
            return 1;
        }
        size_t klen = (size_t)(eq - a);
        const char *v = eq + 1;
        bool known = false;
        for (int g = 0; g < 9; g++) {
            if (strlen(geo_keys[g]) == klen && strncmp(a, geo_keys[g], klen) == 0) {
                if (!parse_u64(v, &geo[g]) || geo[g] == 0) {
                    fprintf(stderr, "perfguard plugin: %s must be a positive integer, got '%s'\n",
                            geo_keys[g], v);
                    return 1;
                }
                known = true;
            }
        }
        if (known)
            continue;
#define KEY(name) (klen == strlen(name) && strncmp(a, name, klen) == 0)
        if (KEY("out") && *v) {
            out_path = v;
        } else if (KEY("arch")) {
            arch_name = v;
        } else if (KEY("roi_begin") && *v) {
            roi_begin_name = v;
        } else if (KEY("roi_end") && *v) {
            roi_end_name = v;
        } else if (KEY("dump") && *v) {
            dump_path = v;
        } else {
            fprintf(stderr, "perfguard plugin: unknown or empty argument '%s'\n", a);
            return 1;
        }
#undef KEY
    }
    if (!out_path) {
        fprintf(stderr, "perfguard plugin: missing required argument out=PATH\n");
        return 1;
    }
    if (!arch_name) {
        fprintf(stderr, "perfguard plugin: missing required argument arch=x86_64|aarch64|riscv64\n");
        return 1;
    }
    if (strcmp(arch_name, "x86_64") == 0) {
        arch = ARCH_X86_64;
    } else if (strcmp(arch_name, "aarch64") == 0) {
        arch = ARCH_AARCH64;
    } else if (strcmp(arch_name, "riscv64") == 0) {
        arch = ARCH_RISCV64;
    } else {
        fprintf(stderr, "perfguard plugin: unknown arch '%s' (x86_64, aarch64, riscv64)\n", arch_name);
        return 1;
    }
    if (info && info->target_name && strcmp(info->target_name, arch_name) != 0) {
        fprintf(stderr, "perfguard plugin: arch=%s but QEMU emulates %s\n", arch_name, info->target_name);
        return 1;
    }
    if (info && info->system_emulation) {
        fprintf(stderr, "perfguard plugin: needs QEMU user mode, not system emulation\n");
        return 1;
    }
    if (!cache_init(&l1i, "l1i", geo[0], geo[1], geo[2]) || !cache_init(&l1d, "l1d", geo[3], geo[4], geo[5]) ||
        !cache_init(&l2, "l2", geo[6], geo[7], geo[8]))
        return 1;
    if (dump_path) {
        dump_file = fopen(dump_path, "w");
        if (!dump_file) {
            fprintf(stderr, "perfguard plugin: cannot write %s: %s\n", dump_path, strerror(errno));
            return 1;
        }
    }
    qemu_plugin_register_vcpu_init_cb(id, vcpu_init);
    qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
    qemu_plugin_register_atexit_cb(id, write_stats, NULL);
    return 0;
}
