/*
 * libdcmi_double: a C stand-in for libdcmi.so, built from the call shapes of contract section 10.
 *
 * It exports the DCMI functions the dcmi-exporter binds (same names, same C signatures, structs
 * from dcmi_double.h) and answers them from an in-memory model of a node: both generations, the
 * v1 `dcmi_*` calls (a chip is (card, dev)) and the v2 `dcmiv2_*` calls of the 950 drivers (a chip
 * is its logic id), over the same model. A library that speaks v2 only is one whose dcmi_init
 * fails: `rc dcmi_init * -8255` (or dcmi_double_set_rc("dcmi_init", -1, -8255)). Tests drive the
 * model in two ways:
 *
 * 1. In process, through the exported dcmi_double_* control functions (see "Control API" below);
 *    ctypes loads the same path as the backend, so both share this library's state.
 * 2. Out of process (an exporter started as a subprocess), through a config file named by the
 *    environment variable DCMI_DOUBLE_CONFIG. dcmi_init() (and dcmiv2_init()) resets the model and
 *    applies the file; afterwards the file is re-read whenever its mtime changes (checked on
 *    dcmi_get_card_list, dcmiv2_get_device_list and both health calls), so a test can inject faults
 *    into a running exporter by rewriting it. Without the variable the init calls leave the model
 *    alone (in-process tests configure first).
 *
 * Config file format: one command per line, tokens separated by blanks, '#' starts a comment.
 * <logic> is a logic id or '*' (every chip); numbers accept 0x hex.
 *   chip <card> <dev> <logic> <phy>          the first chip line replaces the default layout
 *   int <field> <logic> <value>              see set_int_field() for the field names
 *   str <field> <logic> <text...>            rest of the line; fields in set_str_field()
 *   codes <logic> [<hex>[,<hex>...]]         current error codes (hex, with or without 0x)
 *   procs <logic> [<pid>:<bytes>[,...]]      running processes
 *   urma <logic> <index> [<hex32>[,...]]     a urma device's EIDs (32 hex digits each); the chip's
 *                                            device count grows to index + 1 (`int urma_count` sets it)
 *   rc <function|*> <logic> <rc>             make a call return rc (0 removes the override)
 *   hang <logic> <ms|forever>                calls for the chip block (until the file changes)
 *   event <delay_ms> <logic> <hex id> <severity> <assertion> [name...]
 *                                            fired from a new thread delay_ms after subscription
 * Example:
 *   chip 0 0 0 2
 *   chip 0 1 1 3
 *   codes 1 80E01801,8C1FA006
 *   rc dcmi_get_device_health 1 -8012
 *
 * Default layout: cards 0 and 1, two chips each, logic 0..3 -> phy 2, 3, 0, 1.
 *
 * Build variants: -DDOUBLE_NO_SUBSCRIBE leaves out dcmi_subscribe_fault_event,
 * dcmiv2_subscribe_fault_event, dcmi_get_netdev_brother_device and dcmi_set_multi_die_policy, like
 * an older driver, to prove that missing symbols are handled.
 *
 * Concurrency: one mutex guards the model; a "hung" call waits on a condition variable with the
 * mutex released, and callbacks run without the mutex, on a thread of their own like a driver's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <arpa/inet.h>

#include "dcmi_double.h"

#define EXPORT __attribute__((visibility("default")))

#define MAX_CHIPS 64
#define MAX_CODES 256
#define MAX_VDEVS 16
#define MAX_OVERRIDES 64
#define MAX_EVENTS 32
#define MAX_URMA_DEVS 8 /* the double's room; the library's own bound is 128 */
#define NO_CHIP MAX_CHIPS /* call-count slot of calls that address no chip */

#define RC_OK 0
#define RC_BAD_PARAMETER (-8001)
#define RC_INVALID_DEVICE (-8007)
#define RC_RESET_FAILED (-8015)
#define RC_NOT_SUPPORTED (-8255)

#define BOOT_READY 16
#define BOOT_OS_STARTING 2

/* Every DCMI function the double exports, for call counts and rc overrides. */
enum fn {
    FN_INIT,
    FN_VERSION,
    FN_CARD_LIST,
    FN_DEVICE_NUM,
    FN_LOGIC_ID,
    FN_PHY_FROM_LOGIC,
    FN_LOGIC_FROM_PHY,
    FN_CARD_DEV_FROM_LOGIC,
    FN_CHIP_INFO,
    FN_CHIP_INFO_V2,
    FN_HEALTH,
    FN_ERRORCODE_V2,
    FN_NETWORK_HEALTH,
    FN_IP,
    FN_TEMPERATURE,
    FN_POWER,
    FN_HBM,
    FN_UTILIZATION,
    FN_RESOURCE_INFO,
    FN_RESET,
    FN_BOOT_STATUS,
    FN_CREATE_VDEV,
    FN_DESTROY_VDEV,
    FN_SUBSCRIBE,
    FN_BOARD_INFO,
    FN_PRODUCT_TYPE,
    FN_BROTHER,
    FN_AFFINITY,
    FN_OUTBAND_STATE,
    FN_PRE_RESET,
    FN_RESCAN,
    FN_DEVICE_TYPE,
    FN_DEVICE_INFO,
    FN_MAINBOARD_ID,
    FN_V2_INIT,
    FN_V2_VERSION,
    FN_V2_DEVICE_LIST,
    FN_V2_PHY_ID,
    FN_V2_CHIP_INFO,
    FN_V2_BOARD_INFO,
    FN_V2_DEVICE_TYPE,
    FN_V2_DEVICE_INFO,
    FN_V2_MAINBOARD_ID,
    FN_V2_AFFINITY,
    FN_V2_HEALTH,
    FN_V2_ERROR_CODES,
    FN_V2_NETWORK_HEALTH,
    FN_V2_TEMPERATURE,
    FN_V2_POWER,
    FN_V2_HBM,
    FN_V2_UTILIZATION,
    FN_V2_PROC_MEM,
    FN_V2_BOOT_STATUS,
    FN_V2_SUBSCRIBE,
    FN_V2_RESET,
    FN_V2_OUTBAND_STATE,
    FN_V2_PRE_RESET,
    FN_V2_RESCAN,
    FN_DIE_ID,
    FN_V2_DIE_ID,
    FN_URMA_CNT,
    FN_URMA_EIDS,
    FN_V2_URMA_CNT,
    FN_V2_URMA_EIDS,
    FN_SET_MULTI_DIE_POLICY,
    FN_VOLTAGE,
    FN_FREQUENCY,
    FN_ECC,
    FN_PCIE_BW,
    FN_MULTI_UTIL,
    FN_V2_VOLTAGE,
    FN_V2_FREQUENCY,
    FN_V2_ECC,
    FN_V2_PCIE_BW,
    FN_V2_MULTI_UTIL,
    FN_HCCS_BW,
    FN_MEMORY_V3,
    FN_CARD_ELABEL,
    FN_V2_ELABEL,
    FN_COUNT
};

static const char *const FN_NAMES[FN_COUNT] = {
    "dcmi_init",
    "dcmi_get_dcmi_version",
    "dcmi_get_card_list",
    "dcmi_get_device_num_in_card",
    "dcmi_get_device_logic_id",
    "dcmi_get_device_phyid_from_logicid",
    "dcmi_get_device_logicid_from_phyid",
    "dcmi_get_card_id_device_id_from_logicid",
    "dcmi_get_device_chip_info",
    "dcmi_get_device_chip_info_v2",
    "dcmi_get_device_health",
    "dcmi_get_device_errorcode_v2",
    "dcmi_get_device_network_health",
    "dcmi_get_device_ip",
    "dcmi_get_device_temperature",
    "dcmi_get_device_power_info",
    "dcmi_get_device_hbm_info",
    "dcmi_get_device_utilization_rate",
    "dcmi_get_device_resource_info",
    "dcmi_set_device_reset",
    "dcmi_get_device_boot_status",
    "dcmi_create_vdevice",
    "dcmi_set_destroy_vdevice",
    "dcmi_subscribe_fault_event",
    "dcmi_get_device_board_info",
    "dcmi_get_product_type",
    "dcmi_get_netdev_brother_device",
    "dcmi_get_affinity_cpu_info_by_device_id",
    "dcmi_get_device_outband_channel_state",
    "dcmi_pre_reset_soc",
    "dcmi_rescan_soc",
    "dcmi_get_device_type",
    "dcmi_get_device_info",
    "dcmi_get_mainboard_id",
    "dcmiv2_init",
    "dcmiv2_get_dcmi_version",
    "dcmiv2_get_device_list",
    "dcmiv2_get_chip_phy_id_by_dev_id",
    "dcmiv2_get_device_chip_info",
    "dcmiv2_get_device_board_info",
    "dcmiv2_get_device_type",
    "dcmiv2_get_device_info",
    "dcmiv2_get_mainboard_id",
    "dcmiv2_get_affinity_cpu_info_by_dev_id",
    "dcmiv2_get_device_health",
    "dcmiv2_get_device_error_code_list",
    "dcmiv2_get_device_network_health",
    "dcmiv2_get_device_temperature",
    "dcmiv2_get_device_power_info",
    "dcmiv2_get_device_hbm_info",
    "dcmiv2_get_device_utilization_rate",
    "dcmiv2_get_device_proc_mem_info",
    "dcmiv2_get_device_boot_status",
    "dcmiv2_subscribe_fault_event",
    "dcmiv2_reset_device",
    "dcmiv2_get_device_outband_channel_state",
    "dcmiv2_pre_reset_device",
    "dcmiv2_rescan_device",
    "dcmi_get_device_die_v2",
    "dcmiv2_get_device_die_id",
    "dcmi_get_urma_device_cnt",
    "dcmi_get_eid_list_by_urma_dev_index",
    "dcmiv2_get_urma_device_cnt",
    "dcmiv2_get_eid_list_by_urma_dev_index",
    "dcmi_set_multi_die_policy",
    "dcmi_get_device_voltage",
    "dcmi_get_device_frequency",
    "dcmi_get_device_ecc_info",
    "dcmi_get_pcie_link_bandwidth_info",
    "dcmi_get_device_multi_utilization_rate",
    "dcmiv2_get_device_voltage",
    "dcmiv2_get_device_frequency",
    "dcmiv2_get_device_ecc_info",
    "dcmiv2_get_pcie_link_bandwidth_info",
    "dcmiv2_get_device_multi_utilization_rate",
    "dcmi_get_hccs_link_bandwidth_info",
    "dcmi_get_device_memory_info_v3",
    "dcmi_get_card_elabel_v2",
    "dcmiv2_get_device_elabel_info",
};

struct vdev {
    unsigned int vdev_id;
    unsigned int vfg_id;
    char template_name[DCMI_TEMPLATE_NAME_LEN + 1];
    /* the resource query's AI cores (from the template's vir<NN> at creation) and the activity
     * query's readings; set with dcmi_double_set_vdev */
    float aic;
    unsigned int aicore_util;
    unsigned long long mem_total, mem_free;
};

struct chip {
    int present;
    int card, dev, phy;
    char chip_type[DCMI_CHIP_NAME_LEN], chip_name[DCMI_CHIP_NAME_LEN], chip_ver[DCMI_CHIP_NAME_LEN];
    char npu_name[DCMI_CHIP_NAME_LEN];
    unsigned int aicore;
    unsigned int health;
    int network_health;
    int temperature;
    int power; /* 0.1 W */
    struct dcmi_hbm_info hbm;
    unsigned int util_aicore, util_hbm;
    unsigned int codes[MAX_CODES];
    int ncodes;
    int nprocs;
    int pids[DCMI_MAX_PROCS];
    unsigned long proc_mem[DCMI_MAX_PROCS];
    int boot_status;
    int boot_delay;     /* reads that report "starting" after a reset */
    int boot_countdown; /* reads left before the chip reports ready again */
    struct dcmi_board_info board;
    char product_type[64];
    int brother_card;
    int unit_type; /* enum dcmi_unit_type: 0 NPU */
    struct dcmi_spod_info spod;
    unsigned int mainboard_id;
    unsigned int vdie[DCMI_DIE_ID_COUNT]; /* VDIE: every chip */
    unsigned int ddie[DCMI_DIE_ID_COUNT]; /* DDIE: asked through v2 only */
    /* URMA devices: the count the chip answers (may exceed what is stored, to model a driver that
     * says more than it lists) and each stored device's EIDs, raw. None by default. */
    unsigned int urma_count;
    unsigned int urma_neids[MAX_URMA_DEVS];
    unsigned char urma_stored[MAX_URMA_DEVS]; /* a counted index never stored fails, as an unreadable one */
    unsigned char urma_eids[MAX_URMA_DEVS][DCMI_URMA_EID_MAX_COUNT][DCMI_URMA_EID_SIZE];
    char affinity[64];
    int ip_type; /* -1: no address configured */
    unsigned char ip[16];
    unsigned char mask[16];
    int outband_state;
    int last_reset_channel;
    char reset_log[256];
    int pre_reset_done;
    int nvdevs;
    struct vdev vdevs[MAX_VDEVS];
    unsigned int next_vfg;
    unsigned int req_vdev, req_vfg;
    char req_template[DCMI_TEMPLATE_NAME_LEN + 1];
    int hang_ms; /* 0 none, < 0 until released, > 0 every call takes that long */
    /* metrics (npu-exporter parity) */
    unsigned int voltage; /* 0.01 V */
    unsigned int aicore_freq; /* MHz */
    unsigned int util_vector, util_cube, util_overall;
    struct dcmi_ecc_info hbm_ecc;
    struct dcmi_pcie_link_bandwidth_info pcie; /* profiling_time: the last one asked */
    struct dcmi_hccs_statistic_info_u64 hccs;
    struct dcmi_hccs_bandwidth_info hccs_bw; /* profiling_time: the last one asked */
    struct dcmi_sio_crc_err_statistic_info sio;
    struct dcmi_get_memory_info_stru memory;
    char serial[DCMI_ELABEL_LEN];
};

struct override {
    int fn; /* -1: every function */
    int logic; /* -1: any chip and calls that address no chip */
    int rc;
};

struct pending_event {
    int delay_ms;
    struct dcmi_event ev;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static struct chip g_chips[MAX_CHIPS];
static int g_order[MAX_CHIPS]; /* logic ids in (card, dev) order */
static int g_nchips;
static struct override g_overrides[MAX_OVERRIDES];
static int g_noverrides;
static int g_counts[FN_COUNT][MAX_CHIPS + 1];
static int g_hanging;
static unsigned long g_generation; /* bumped by reset/release so that waiting calls re-check */
static char g_version[64];
static unsigned int g_next_vdev;

static dcmi_fault_event_callback g_cb;
static int g_sub_card, g_sub_dev;
static struct dcmi_event_filter g_sub_filter;
static struct pending_event g_events[MAX_EVENTS];
static int g_nevents;

static char g_config_path[4096];
static struct timespec g_config_mtime;

/* ------------------------------------------------------------------------------------------ */
/* model                                                                                        */

static void reset_model(int keep_subscription);

static void init_once(void)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    /* monotonic, so that a test machine's clock change cannot end or stretch a hang */
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&g_cv, &attr);
    pthread_condattr_destroy(&attr);
    reset_model(0); /* the model exists before the first call of any kind */
}

static void copy_str(char *dst, size_t size, const char *src)
{
    snprintf(dst, size, "%s", src ? src : "");
}

static void chip_defaults(struct chip *c, int card, int dev, int logic, int phy)
{
    memset(c, 0, sizeof(*c));
    c->present = 1;
    c->card = card;
    c->dev = dev;
    c->phy = phy;
    copy_str(c->chip_type, sizeof(c->chip_type), "Ascend");
    copy_str(c->chip_name, sizeof(c->chip_name), "910B3");
    copy_str(c->chip_ver, sizeof(c->chip_ver), "V1");
    c->aicore = 20;
    c->health = 0;
    c->network_health = 0;
    c->temperature = 40 + logic;
    c->power = 900 + 10 * logic;
    c->hbm.memory_size = 65536;
    c->hbm.freq = 1600;
    c->hbm.memory_usage = 1024ULL * (unsigned long long)(logic + 1);
    c->hbm.temp = 45;
    c->hbm.bandwith_util_rate = 5;
    c->util_aicore = 10 + (unsigned int)logic;
    c->util_hbm = 20 + (unsigned int)logic;
    c->boot_status = BOOT_READY;
    c->boot_delay = 2;
    c->board.board_id = 0x22;
    c->board.slot_id = (unsigned int)phy;
    copy_str(c->product_type, sizeof(c->product_type), "Atlas 800T A2");
    c->brother_card = card ^ 1;
    /* A super pod answer even though the default chip is no A3: the binding must not ask it.
     * SDID as the A3 encodes it: server index in bits 22..31, the device in bits 0..15. */
    c->spod.sdid = (unsigned int)phy;
    c->spod.super_pod_id = 0;
    c->spod.server_id = 0;
    c->mainboard_id = 0x0A; /* any value: the reference names no 910B main board */
    /* Die ids unique per chip, as the simulator's (sim/profiles.py die_id_words): phy 0 (logic 2
     * of the default layout) gets the example, 00000001-0000ABCD-00000000-00000000-00000012. */
    c->vdie[0] = 0x1;
    c->vdie[1] = 0xABCD;
    c->vdie[4] = 0x12 + (unsigned int)phy;
    c->ddie[0] = 0x2;
    c->ddie[1] = 0xDD1E;
    c->ddie[4] = 0x12 + (unsigned int)phy;
    snprintf(c->affinity, sizeof(c->affinity), "%d-%d", (phy / 2) * 16, (phy / 2) * 16 + 15);
    c->ip_type = 0;
    c->ip[0] = 192;
    c->ip[1] = 168;
    c->ip[2] = 100;
    c->ip[3] = (unsigned char)(100 + phy);
    memset(c->mask, 0xff, 3);
    c->outband_state = 1;
    c->last_reset_channel = -1;
    c->voltage = 8000 + (unsigned int)logic; /* 80.00 V and up */
    c->aicore_freq = 1800;
    c->util_vector = 30 + (unsigned int)logic;
    c->util_cube = 40 + (unsigned int)logic;
    c->util_overall = 50 + (unsigned int)logic;
    c->hbm_ecc.enable_flag = 1;
    c->hbm_ecc.single_bit_error_cnt = (unsigned int)phy;
    /* HCCS: port p sends 1000 * (phy + 1) + p, receives that + 500, no CRC errors; 1.5 MB/s a port.
     * DDR: 8192 MB, half free. Serial: SN<phy>. */
    for (int p = 0; p < HCCS_MAX_PCS_NUM; p++) {
        c->hccs.tx_cnt[p] = 1000ULL * (unsigned long long)(phy + 1) + (unsigned long long)p;
        c->hccs.rx_cnt[p] = c->hccs.tx_cnt[p] + 500;
        c->hccs_bw.tx_bandwidth[p] = 1.5;
        c->hccs_bw.rx_bandwidth[p] = 1.5;
    }
    c->hccs_bw.total_txbw = 10.5;
    c->hccs_bw.total_rxbw = 10.5;
    c->memory.memory_size = 8192;
    c->memory.memory_available = 4096;
    snprintf(c->serial, sizeof(c->serial), "SN%d", phy);
    /* PCIe (min, max, avg): tx_p 100/300/200 + phy, each further array +1000 */
    unsigned int *bw[] = {c->pcie.tx_p_bw, c->pcie.tx_np_bw, c->pcie.tx_cpl_bw,
                          c->pcie.rx_p_bw, c->pcie.rx_np_bw, c->pcie.rx_cpl_bw};
    for (int i = 0; i < 6; i++) {
        bw[i][0] = 100 + 1000 * (unsigned int)i + (unsigned int)phy;
        bw[i][1] = 300 + 1000 * (unsigned int)i + (unsigned int)phy;
        bw[i][2] = 200 + 1000 * (unsigned int)i + (unsigned int)phy;
    }
}

static void clear_layout(void)
{
    for (int i = 0; i < MAX_CHIPS; i++) {
        g_chips[i].present = 0;
    }
    g_nchips = 0;
}

static int add_chip(int card, int dev, int logic, int phy)
{
    if (logic < 0 || logic >= MAX_CHIPS || card < 0 || dev < 0 || phy < 0 || g_chips[logic].present) {
        return -1;
    }
    chip_defaults(&g_chips[logic], card, dev, logic, phy);
    g_order[g_nchips++] = logic;
    return 0;
}

static void default_layout(void)
{
    static const int phys[4] = {2, 3, 0, 1};
    clear_layout();
    for (int logic = 0; logic < 4; logic++) {
        add_chip(logic / 2, logic % 2, logic, phys[logic]);
    }
}

/* Back to the default model; keeps the subscription when keep_subscription is set. */
static void reset_model(int keep_subscription)
{
    default_layout();
    g_noverrides = 0;
    memset(g_counts, 0, sizeof(g_counts));
    copy_str(g_version, sizeof(g_version), "24.1.rc2");
    g_next_vdev = 100;
    g_nevents = 0;
    if (!keep_subscription) {
        g_cb = NULL;
        g_sub_card = g_sub_dev = 0;
        memset(&g_sub_filter, 0, sizeof(g_sub_filter));
    }
    g_generation++;
    pthread_cond_broadcast(&g_cv); /* hangs are gone with the old model */
}

static int logic_of(int card, int dev)
{
    for (int i = 0; i < g_nchips; i++) {
        const struct chip *c = &g_chips[g_order[i]];
        if (c->card == card && c->dev == dev) {
            return g_order[i];
        }
    }
    return -1;
}

static int fn_index(const char *name)
{
    for (int i = 0; i < FN_COUNT; i++) {
        if (strcmp(FN_NAMES[i], name) == 0) {
            return i;
        }
    }
    return -2;
}

static int override_rc(int fn, int logic)
{
    for (int i = 0; i < g_noverrides; i++) {
        const struct override *o = &g_overrides[i];
        if ((o->fn == -1 || o->fn == fn) && (o->logic == -1 || o->logic == logic)) {
            return o->rc;
        }
    }
    return RC_OK;
}

static int set_override(int fn, int logic, int rc)
{
    for (int i = 0; i < g_noverrides; i++) {
        if (g_overrides[i].fn == fn && g_overrides[i].logic == logic) {
            if (rc == RC_OK) {
                g_overrides[i] = g_overrides[--g_noverrides];
            } else {
                g_overrides[i].rc = rc;
            }
            return 0;
        }
    }
    if (rc == RC_OK) {
        return 0;
    }
    if (g_noverrides == MAX_OVERRIDES) {
        return -1;
    }
    g_overrides[g_noverrides++] = (struct override){fn, logic, rc};
    return 0;
}

static void deadline_after(struct timespec *ts, int ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec += 1;
        ts->tv_nsec -= 1000000000L;
    }
}

/* Blocks while the chip is hung; called and returns with g_mu held. */
static void wait_if_hung(int logic)
{
    struct chip *c = &g_chips[logic];
    if (c->hang_ms == 0) {
        return;
    }
    unsigned long generation = g_generation;
    g_hanging++;
    if (c->hang_ms < 0) {
        while (c->hang_ms < 0 && g_generation == generation) {
            pthread_cond_wait(&g_cv, &g_mu);
        }
    } else {
        struct timespec deadline;
        deadline_after(&deadline, c->hang_ms);
        while (c->hang_ms > 0 && g_generation == generation) {
            if (pthread_cond_timedwait(&g_cv, &g_mu, &deadline) == ETIMEDOUT) {
                break;
            }
        }
    }
    g_hanging--;
}

static void maybe_reload_config(void);
static int set_urma_locked(int logic, unsigned int index, int n, const unsigned char *raw);
/* Counts the call for chip l (-1: none), blocks while it hangs and applies an rc override; g_mu held. */
static int enter_chip(enum fn fn, int l, int *logic)
{
    g_counts[fn][l < 0 ? NO_CHIP : l]++;
    if (l < 0) {
        return RC_INVALID_DEVICE;
    }
    wait_if_hung(l);
    if (!g_chips[l].present) { /* the layout changed while the call was blocked */
        return RC_INVALID_DEVICE;
    }
    *logic = l;
    return override_rc(fn, l);
}

/*
 * Entry of every v1 chip call: locks the model, resolves (card, dev) and enters the chip. Returns
 * with g_mu HELD; *logic is the chip's logic id when the return value is RC_OK.
 */
static int begin_chip(enum fn fn, int card, int dev, int *logic)
{
    pthread_once(&g_once, init_once);
    pthread_mutex_lock(&g_mu);
    return enter_chip(fn, logic_of(card, dev), logic);
}

/* Entry of every v2 chip call: the chip is its logic id (dev_id). Returns with g_mu HELD. */
static int begin_logic(enum fn fn, int dev_id, int *logic)
{
    pthread_once(&g_once, init_once);
    pthread_mutex_lock(&g_mu);
    int l = dev_id >= 0 && dev_id < MAX_CHIPS && g_chips[dev_id].present ? dev_id : -1;
    return enter_chip(fn, l, logic);
}

/* Entry of calls that address no chip; returns with g_mu HELD. */
static int begin_global(enum fn fn)
{
    pthread_once(&g_once, init_once);
    pthread_mutex_lock(&g_mu);
    g_counts[fn][NO_CHIP]++;
    return override_rc(fn, -1);
}

#define CHIP_CALL(fn, card, dev)                          \
    int logic_ = -1;                                      \
    int rc_ = begin_chip((fn), (card), (dev), &logic_);   \
    if (rc_ != RC_OK) {                                   \
        pthread_mutex_unlock(&g_mu);                      \
        return rc_;                                       \
    }                                                     \
    struct chip *c = &g_chips[logic_]

#define LOGIC_CALL(fn, dev_id)                            \
    int logic_ = -1;                                      \
    int rc_ = begin_logic((fn), (dev_id), &logic_);       \
    if (rc_ != RC_OK) {                                   \
        pthread_mutex_unlock(&g_mu);                      \
        return rc_;                                       \
    }                                                     \
    struct chip *c = &g_chips[logic_]

#define GLOBAL_CALL(fn)                     \
    int rc_ = begin_global(fn);             \
    if (rc_ != RC_OK) {                     \
        pthread_mutex_unlock(&g_mu);        \
        return rc_;                         \
    }

/* Locks the model and counts a call that addresses no chip, leaving its rc override to the body. */
#define GLOBAL_ENTRY(fn) (void)begin_global(fn)

#define RETURN(rc)                   \
    do {                             \
        pthread_mutex_unlock(&g_mu); \
        return (rc);                 \
    } while (0)

/* Answers with `expr`, evaluated while g_mu is still held. */
#define ANSWER(expr)                 \
    do {                             \
        int answer_ = (expr);        \
        pthread_mutex_unlock(&g_mu); \
        return answer_;              \
    } while (0)

/* ------------------------------------------------------------------------------------------ */
/* events                                                                                       */

struct delivery {
    int delay_ms;
    struct dcmi_event ev;
};

/* Runs on its own thread, like the driver's event thread. */
static void *deliver(void *arg)
{
    struct delivery *d = arg;
    if (d->delay_ms > 0) {
        struct timespec ts = {d->delay_ms / 1000, (long)(d->delay_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    pthread_mutex_lock(&g_mu);
    dcmi_fault_event_callback cb = g_cb;
    pthread_mutex_unlock(&g_mu);
    if (cb != NULL) {
        cb(&d->ev); /* never with the mutex held: the callback may call back into the library */
    }
    free(d);
    return NULL;
}

static void build_event(struct dcmi_event *ev, int type, int logic, unsigned int event_id, int severity,
                        int assertion, unsigned long long raised, const char *name)
{
    memset(ev, 0, sizeof(*ev));
    ev->type = type;
    struct dcmi_dms_fault_event *f = &ev->event_t.dms_event;
    f->event_id = event_id;
    f->deviceid = (unsigned short)logic;
    f->severity = (unsigned char)severity;
    f->assertion = (unsigned char)assertion;
    f->alarm_raised_time = raised;
    f->event_serial_num = 1;
    f->notify_serial_num = 1;
    copy_str(f->event_name, sizeof(f->event_name), name);
}

/* Starts the config file's scheduled events; g_mu held. */
static void start_pending_events(void)
{
    for (int i = 0; i < g_nevents; i++) {
        struct delivery *d = malloc(sizeof(*d));
        if (d == NULL) {
            continue;
        }
        d->delay_ms = g_events[i].delay_ms;
        d->ev = g_events[i].ev;
        pthread_t t;
        if (pthread_create(&t, NULL, deliver, d) == 0) {
            pthread_detach(t);
        } else {
            free(d);
        }
    }
    g_nevents = 0;
}

/* ------------------------------------------------------------------------------------------ */
/* settable fields (shared by the control API and the config file); g_mu held                   */

static int metrics_field(struct chip *c, const char *field, long long v);
static int hccs_field(struct chip *c, const char *field, long long v);
static int counters_locked(const struct chip *c, int main_cmd, unsigned int sub_cmd, void *buf, unsigned int *size);

static int set_int_field(struct chip *c, const char *field, long long v)
{
    if (strcmp(field, "health") == 0) {
        c->health = (unsigned int)v;
    } else if (strcmp(field, "network_health") == 0) {
        c->network_health = (int)v;
    } else if (strcmp(field, "temperature") == 0) {
        c->temperature = (int)v;
    } else if (strcmp(field, "power") == 0) { /* 0.1 W */
        c->power = (int)v;
    } else if (strcmp(field, "aicore") == 0) {
        c->aicore = (unsigned int)v;
    } else if (strcmp(field, "hbm_total") == 0) {
        c->hbm.memory_size = (unsigned long long)v;
    } else if (strcmp(field, "hbm_used") == 0) {
        c->hbm.memory_usage = (unsigned long long)v;
    } else if (strcmp(field, "hbm_freq") == 0) {
        c->hbm.freq = (unsigned int)v;
    } else if (strcmp(field, "hbm_temp") == 0) {
        c->hbm.temp = (int)v;
    } else if (strcmp(field, "hbm_bw") == 0) {
        c->hbm.bandwith_util_rate = (unsigned int)v;
    } else if (strcmp(field, "util_aicore") == 0) {
        c->util_aicore = (unsigned int)v;
    } else if (strcmp(field, "util_hbm") == 0) {
        c->util_hbm = (unsigned int)v;
    } else if (strcmp(field, "boot_status") == 0) {
        c->boot_status = (int)v;
        c->boot_countdown = 0;
    } else if (strcmp(field, "boot_delay") == 0) {
        c->boot_delay = (int)v;
    } else if (strcmp(field, "board_id") == 0) {
        c->board.board_id = (unsigned int)v;
    } else if (strcmp(field, "brother_card") == 0) {
        c->brother_card = (int)v;
    } else if (strcmp(field, "unit_type") == 0) {
        c->unit_type = (int)v;
    } else if (strcmp(field, "sdid") == 0) {
        c->spod.sdid = (unsigned int)v;
    } else if (strcmp(field, "scale_type") == 0) {
        c->spod.scale_type = (unsigned int)v;
    } else if (strcmp(field, "super_pod_id") == 0) {
        c->spod.super_pod_id = (unsigned int)v;
    } else if (strcmp(field, "server_id") == 0) {
        c->spod.server_id = (unsigned int)v;
    } else if (strcmp(field, "chassis_id") == 0) {
        c->spod.chassis_id = (unsigned int)v;
    } else if (strcmp(field, "super_pod_type") == 0) {
        c->spod.super_pod_type = (unsigned int)v;
    } else if (strcmp(field, "mainboard_id") == 0) {
        c->mainboard_id = (unsigned int)v;
    } else if (strcmp(field, "urma_count") == 0) {
        c->urma_count = (unsigned int)v;
    } else if (strncmp(field, "vdie", 4) == 0 && field[4] >= '0' && field[4] < '0' + DCMI_DIE_ID_COUNT &&
               field[5] == '\0') { /* vdie0 .. vdie4: one word */
        c->vdie[field[4] - '0'] = (unsigned int)v;
    } else if (strncmp(field, "ddie", 4) == 0 && field[4] >= '0' && field[4] < '0' + DCMI_DIE_ID_COUNT &&
               field[5] == '\0') { /* ddie0 .. ddie4 */
        c->ddie[field[4] - '0'] = (unsigned int)v;
    } else if (strcmp(field, "outband_state") == 0) {
        c->outband_state = (int)v;
    } else if (strcmp(field, "next_vfg_id") == 0) {
        c->next_vfg = (unsigned int)v;
    } else if (strcmp(field, "next_vdev_id") == 0) { /* node-wide */
        g_next_vdev = (unsigned int)v;
    } else if (metrics_field(c, field, v) == 0) {
        /* voltage, aicore_freq, util_*, ecc_*, pcie_* */
    } else {
        return -1;
    }
    return 0;
}

static int parse_ip(struct chip *c, const char *text)
{
    unsigned char buf[16] = {0};
    if (text == NULL || text[0] == '\0') {
        c->ip_type = -1;
        return 0;
    }
    if (inet_pton(AF_INET, text, buf) == 1) {
        c->ip_type = 0;
        memset(c->ip, 0, sizeof(c->ip));
        memcpy(c->ip, buf, 4);
        return 0;
    }
    if (inet_pton(AF_INET6, text, buf) == 1) {
        c->ip_type = 1;
        memcpy(c->ip, buf, 16);
        return 0;
    }
    return -1;
}

static int set_str_field(struct chip *c, const char *field, const char *v)
{
    if (strcmp(field, "chip_type") == 0) {
        copy_str(c->chip_type, sizeof(c->chip_type), v);
    } else if (strcmp(field, "chip_name") == 0) {
        copy_str(c->chip_name, sizeof(c->chip_name), v);
    } else if (strcmp(field, "chip_ver") == 0) {
        copy_str(c->chip_ver, sizeof(c->chip_ver), v);
    } else if (strcmp(field, "npu_name") == 0) {
        copy_str(c->npu_name, sizeof(c->npu_name), v);
    } else if (strcmp(field, "product_type") == 0) {
        copy_str(c->product_type, sizeof(c->product_type), v);
    } else if (strcmp(field, "serial") == 0) { /* "" makes the elabel calls unsupported */
        copy_str(c->serial, sizeof(c->serial), v);
    } else if (strcmp(field, "affinity") == 0) { /* "" makes the call unsupported */
        copy_str(c->affinity, sizeof(c->affinity), v);
    } else if (strcmp(field, "ip") == 0) { /* dotted v4 or v6 text; "" makes the call unsupported */
        return parse_ip(c, v);
    } else if (strcmp(field, "version") == 0) { /* node-wide */
        copy_str(g_version, sizeof(g_version), v);
    } else {
        return -1;
    }
    return 0;
}

static int apply_to(int logic, int (*fn)(struct chip *, const char *, const void *), const char *field,
                    const void *value)
{
    if (logic == -1) {
        int rc = 0;
        for (int i = 0; i < g_nchips; i++) {
            rc |= fn(&g_chips[g_order[i]], field, value);
        }
        return g_nchips == 0 ? -1 : rc;
    }
    if (logic < 0 || logic >= MAX_CHIPS || !g_chips[logic].present) {
        return -1;
    }
    return fn(&g_chips[logic], field, value);
}

static int int_thunk(struct chip *c, const char *field, const void *value)
{
    return set_int_field(c, field, *(const long long *)value);
}

static int str_thunk(struct chip *c, const char *field, const void *value)
{
    return set_str_field(c, field, (const char *)value);
}

static int set_codes_locked(int logic, int n, const unsigned int *codes)
{
    if (logic < 0 || logic >= MAX_CHIPS || !g_chips[logic].present || n < 0 || n > MAX_CODES) {
        return -1;
    }
    struct chip *c = &g_chips[logic];
    for (int i = 0; i < n; i++) {
        c->codes[i] = codes[i];
    }
    c->ncodes = n;
    return 0;
}

static int set_hang_locked(int logic, int ms)
{
    if (logic == -1) {
        for (int i = 0; i < g_nchips; i++) {
            g_chips[g_order[i]].hang_ms = ms;
        }
    } else if (logic >= 0 && logic < MAX_CHIPS && g_chips[logic].present) {
        g_chips[logic].hang_ms = ms;
    } else {
        return -1;
    }
    if (ms == 0) {
        g_generation++;
        pthread_cond_broadcast(&g_cv);
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* config file                                                                                  */

static int parse_logic(const char *tok, int *logic)
{
    if (tok == NULL) {
        return -1;
    }
    if (strcmp(tok, "*") == 0) {
        *logic = -1;
        return 0;
    }
    char *end = NULL;
    long v = strtol(tok, &end, 0);
    if (*end != '\0' || v < 0 || v >= MAX_CHIPS) {
        return -1;
    }
    *logic = (int)v;
    return 0;
}

static int parse_ll(const char *tok, long long *out)
{
    if (tok == NULL) {
        return -1;
    }
    char *end = NULL;
    *out = strtoll(tok, &end, 0);
    return *end == '\0' ? 0 : -1;
}

static char *rest_of_line(char *s)
{
    if (s == NULL) {
        return (char *)"";
    }
    while (*s == ' ' || *s == '\t') {
        s++;
    }
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r')) {
        s[--n] = '\0';
    }
    return s;
}

/* Applies one line; g_mu held. Returns 0, or -1 when the line is invalid. */
static int apply_line(char *line, int *layout_replaced)
{
    char *hash = strchr(line, '#');
    if (hash != NULL) {
        *hash = '\0';
    }
    char *save = NULL;
    char *cmd = strtok_r(line, " \t\r\n", &save);
    if (cmd == NULL) {
        return 0;
    }
    if (strcmp(cmd, "chip") == 0) {
        long long v[4];
        for (int i = 0; i < 4; i++) {
            if (parse_ll(strtok_r(NULL, " \t\r\n", &save), &v[i]) != 0) {
                return -1;
            }
        }
        if (!*layout_replaced) {
            clear_layout();
            *layout_replaced = 1;
        }
        return add_chip((int)v[0], (int)v[1], (int)v[2], (int)v[3]);
    }
    if (strcmp(cmd, "int") == 0) {
        char *field = strtok_r(NULL, " \t\r\n", &save);
        int logic;
        long long value;
        if (field == NULL || parse_logic(strtok_r(NULL, " \t\r\n", &save), &logic) != 0 ||
            parse_ll(strtok_r(NULL, " \t\r\n", &save), &value) != 0) {
            return -1;
        }
        return apply_to(logic, int_thunk, field, &value);
    }
    if (strcmp(cmd, "str") == 0) {
        char *field = strtok_r(NULL, " \t\r\n", &save);
        int logic;
        if (field == NULL || parse_logic(strtok_r(NULL, " \t\r\n", &save), &logic) != 0) {
            return -1;
        }
        char *value = rest_of_line(strtok_r(NULL, "\r\n", &save));
        if (strcmp(field, "version") == 0) {
            copy_str(g_version, sizeof(g_version), value);
            return 0;
        }
        return apply_to(logic, str_thunk, field, value);
    }
    if (strcmp(cmd, "codes") == 0) {
        int logic;
        if (parse_logic(strtok_r(NULL, " \t\r\n", &save), &logic) != 0 || logic < 0) {
            return -1;
        }
        unsigned int codes[MAX_CODES];
        int n = 0;
        char *list = strtok_r(NULL, " \t\r\n", &save);
        char *save2 = NULL;
        for (char *t = list ? strtok_r(list, ",", &save2) : NULL; t != NULL; t = strtok_r(NULL, ",", &save2)) {
            char *end = NULL;
            unsigned long long v = strtoull(t, &end, 16);
            if (*end != '\0' || n == MAX_CODES || v > 0xFFFFFFFFULL) {
                return -1;
            }
            codes[n++] = (unsigned int)v;
        }
        return set_codes_locked(logic, n, codes);
    }
    if (strcmp(cmd, "urma") == 0) {
        int logic;
        long long index;
        if (parse_logic(strtok_r(NULL, " \t\r\n", &save), &logic) != 0 || logic < 0 ||
            parse_ll(strtok_r(NULL, " \t\r\n", &save), &index) != 0 || index < 0) {
            return -1;
        }
        unsigned char raw[DCMI_URMA_EID_MAX_COUNT][DCMI_URMA_EID_SIZE];
        int n = 0;
        char *list = strtok_r(NULL, " \t\r\n", &save);
        char *save2 = NULL;
        for (char *t = list ? strtok_r(list, ",", &save2) : NULL; t != NULL; t = strtok_r(NULL, ",", &save2)) {
            if (strlen(t) != 2 * DCMI_URMA_EID_SIZE || n == DCMI_URMA_EID_MAX_COUNT) {
                return -1;
            }
            for (int b = 0; b < DCMI_URMA_EID_SIZE; b++) {
                unsigned int byte;
                if (sscanf(t + 2 * b, "%2x", &byte) != 1) {
                    return -1;
                }
                raw[n][b] = (unsigned char)byte;
            }
            n++;
        }
        return set_urma_locked(logic, (unsigned int)index, n, &raw[0][0]);
    }
    if (strcmp(cmd, "procs") == 0) {
        int logic;
        if (parse_logic(strtok_r(NULL, " \t\r\n", &save), &logic) != 0 || logic < 0 || !g_chips[logic].present) {
            return -1;
        }
        struct chip *c = &g_chips[logic];
        c->nprocs = 0;
        char *list = strtok_r(NULL, " \t\r\n", &save);
        char *save2 = NULL;
        for (char *t = list ? strtok_r(list, ",", &save2) : NULL; t != NULL; t = strtok_r(NULL, ",", &save2)) {
            int pid;
            unsigned long mem;
            if (sscanf(t, "%d:%lu", &pid, &mem) != 2 || c->nprocs == DCMI_MAX_PROCS) {
                return -1;
            }
            c->pids[c->nprocs] = pid;
            c->proc_mem[c->nprocs] = mem;
            c->nprocs++;
        }
        return 0;
    }
    if (strcmp(cmd, "rc") == 0) {
        char *name = strtok_r(NULL, " \t\r\n", &save);
        int logic;
        long long rc;
        if (name == NULL || parse_logic(strtok_r(NULL, " \t\r\n", &save), &logic) != 0 ||
            parse_ll(strtok_r(NULL, " \t\r\n", &save), &rc) != 0) {
            return -1;
        }
        int fn = strcmp(name, "*") == 0 ? -1 : fn_index(name);
        return fn == -2 ? -1 : set_override(fn, logic, (int)rc);
    }
    if (strcmp(cmd, "hang") == 0) {
        int logic;
        char *tok;
        long long ms;
        if (parse_logic(strtok_r(NULL, " \t\r\n", &save), &logic) != 0 ||
            (tok = strtok_r(NULL, " \t\r\n", &save)) == NULL) {
            return -1;
        }
        if (strcmp(tok, "forever") == 0) {
            ms = -1;
        } else if (parse_ll(tok, &ms) != 0 || ms < 0) {
            return -1;
        }
        return set_hang_locked(logic, (int)ms);
    }
    if (strcmp(cmd, "event") == 0) {
        long long delay, sev, assertion;
        int logic;
        char *id_tok;
        if (parse_ll(strtok_r(NULL, " \t\r\n", &save), &delay) != 0 ||
            parse_logic(strtok_r(NULL, " \t\r\n", &save), &logic) != 0 || logic < 0 ||
            (id_tok = strtok_r(NULL, " \t\r\n", &save)) == NULL ||
            parse_ll(strtok_r(NULL, " \t\r\n", &save), &sev) != 0 ||
            parse_ll(strtok_r(NULL, " \t\r\n", &save), &assertion) != 0 || g_nevents == MAX_EVENTS) {
            return -1;
        }
        char *end = NULL;
        unsigned long long id = strtoull(id_tok, &end, 16);
        if (*end != '\0') {
            return -1;
        }
        char *name = rest_of_line(strtok_r(NULL, "\r\n", &save));
        struct pending_event *p = &g_events[g_nevents++];
        p->delay_ms = (int)delay;
        build_event(&p->ev, 0, logic, (unsigned int)id, (int)sev, (int)assertion, (unsigned long long)time(NULL),
                    name);
        return 0;
    }
    return -1;
}

/* Resets the model (keeping the subscription) and applies the file; g_mu held.
 * Returns 0, -1 when the file cannot be read, or the number of the first bad line. */
static int load_config_locked(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return -1;
    }
    struct stat st;
    if (fstat(fileno(f), &st) == 0) {
        g_config_mtime = st.st_mtim;
    }
    reset_model(1);
    char line[1024];
    int lineno = 0, bad = 0, layout_replaced = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        lineno++;
        if (apply_line(line, &layout_replaced) != 0 && bad == 0) {
            bad = lineno;
            fprintf(stderr, "libdcmi_double: %s:%d: invalid line\n", path, lineno);
        }
    }
    fclose(f);
    if (g_cb != NULL) {
        start_pending_events();
    }
    return bad;
}

/* g_mu NOT held. */
static void maybe_reload_config(void)
{
    pthread_once(&g_once, init_once);
    pthread_mutex_lock(&g_mu);
    if (g_config_path[0] != '\0') {
        struct stat st;
        if (stat(g_config_path, &st) == 0 && (st.st_mtim.tv_sec != g_config_mtime.tv_sec ||
                                               st.st_mtim.tv_nsec != g_config_mtime.tv_nsec)) {
            load_config_locked(g_config_path);
        }
    }
    pthread_mutex_unlock(&g_mu);
}

/* ------------------------------------------------------------------------------------------ */
/* DCMI API                                                                                     */
/*                                                                                              */
/* Each call has one body, `*_locked` below, run with g_mu held on the chip the call resolved;   */
/* the v1 entry (`dcmi_*`, the chip as (card, dev)) and the v2 entry (`dcmiv2_*`, the chip as    */
/* its logic id) only resolve the chip and answer with that body.                                */

static int init_locked(enum fn fn)
{
    int rc = override_rc(fn, -1);
    const char *path = getenv("DCMI_DOUBLE_CONFIG");
    if (rc == RC_OK && path != NULL && path[0] != '\0') {
        copy_str(g_config_path, sizeof(g_config_path), path);
        if (load_config_locked(g_config_path) != 0) {
            return RC_BAD_PARAMETER;
        }
        rc = override_rc(fn, -1); /* the file may make this generation's init fail */
    }
    return rc;
}

static int version_locked(char *buf, int size)
{
    if (buf == NULL || size <= 0 || (size_t)size <= strlen(g_version)) {
        return RC_BAD_PARAMETER;
    }
    copy_str(buf, (size_t)size, g_version);
    return RC_OK;
}

static int phy_locked(enum fn fn, unsigned int logic, unsigned int *phy)
{
    if (phy == NULL) {
        return RC_BAD_PARAMETER;
    }
    if (logic >= MAX_CHIPS || !g_chips[logic].present) {
        return RC_INVALID_DEVICE;
    }
    int rc = override_rc(fn, (int)logic);
    if (rc != RC_OK) {
        return rc;
    }
    *phy = (unsigned int)g_chips[logic].phy;
    return RC_OK;
}

static int chip_info_v2_locked(const struct chip *c, struct dcmi_chip_info_v2 *info)
{
    if (info == NULL) {
        return RC_BAD_PARAMETER;
    }
    memset(info, 0, sizeof(*info));
    memcpy(info->chip_type, c->chip_type, sizeof(info->chip_type));
    memcpy(info->chip_name, c->chip_name, sizeof(info->chip_name));
    memcpy(info->chip_ver, c->chip_ver, sizeof(info->chip_ver));
    info->aicore_cnt = c->aicore;
    memcpy(info->npu_name, c->npu_name, sizeof(info->npu_name));
    return RC_OK;
}

static int health_locked(const struct chip *c, unsigned int *health)
{
    if (health == NULL) {
        return RC_BAD_PARAMETER;
    }
    *health = c->health;
    return RC_OK;
}

static int codes_locked(const struct chip *c, int *error_count, unsigned int *error_code_list, unsigned int list_len)
{
    if (error_count == NULL || error_code_list == NULL) {
        return RC_BAD_PARAMETER;
    }
    int n = c->ncodes < (int)list_len ? c->ncodes : (int)list_len;
    for (int i = 0; i < n; i++) {
        error_code_list[i] = c->codes[i];
    }
    *error_count = n;
    return RC_OK;
}

/* The int-valued reads: network health, temperature, power (0.1 W), boot status, unit type,
 * out-of-band channel state. */
static int int_locked(int value, int *out)
{
    if (out == NULL) {
        return RC_BAD_PARAMETER;
    }
    *out = value;
    return RC_OK;
}

static int hbm_locked(const struct chip *c, struct dcmi_hbm_info *hbm_info)
{
    if (hbm_info == NULL) {
        return RC_BAD_PARAMETER;
    }
    *hbm_info = c->hbm;
    return RC_OK;
}

static int utilization_locked(const struct chip *c, int input_type, unsigned int *rate)
{
    if (rate == NULL) {
        return RC_BAD_PARAMETER;
    }
    if (input_type == 2) {
        *rate = c->util_aicore;
    } else if (input_type == 6) {
        *rate = c->util_hbm;
    } else if (input_type == 12) {
        *rate = c->util_vector;
    } else if (input_type == 13) {
        *rate = c->util_overall;
    } else {
        return RC_NOT_SUPPORTED;
    }
    return RC_OK;
}

static int procs_locked(const struct chip *c, struct dcmi_proc_mem_info *proc_info, int *proc_num)
{
    if (proc_info == NULL || proc_num == NULL) {
        return RC_BAD_PARAMETER;
    }
    for (int i = 0; i < c->nprocs; i++) { /* the caller provides DCMI_MAX_PROCS entries */
        proc_info[i].proc_id = c->pids[i];
        proc_info[i].proc_mem_usage = c->proc_mem[i];
    }
    *proc_num = c->nprocs;
    return RC_OK;
}

static void log_step(struct chip *c, const char *step)
{
    size_t n = strlen(c->reset_log);
    snprintf(c->reset_log + n, sizeof(c->reset_log) - n, "%s%s", n ? "," : "", step);
}

static int reset_locked(struct chip *c, int channel_type)
{
    if (channel_type != 0 && channel_type != 1) {
        return RC_BAD_PARAMETER;
    }
    if (channel_type == 0 && (c->outband_state != 1 || !c->pre_reset_done)) {
        return RC_RESET_FAILED; /* out-of-band reset needs a ready channel and a pre-reset */
    }
    c->last_reset_channel = channel_type;
    c->pre_reset_done = 0;
    log_step(c, channel_type == 1 ? "reset:inband" : "reset:outband");
    c->boot_countdown = c->boot_delay;
    return RC_OK;
}

static int boot_status_locked(struct chip *c, int *boot_status)
{
    if (boot_status == NULL) {
        return RC_BAD_PARAMETER;
    }
    if (c->boot_countdown > 0) {
        c->boot_countdown--;
        *boot_status = BOOT_OS_STARTING;
    } else {
        *boot_status = c->boot_status;
    }
    return RC_OK;
}

#ifndef DOUBLE_NO_SUBSCRIBE
/* sub_card / sub_dev: what the caller subscribed for (v2: its dev_id in both). */
static int subscribe_locked(int sub_card, int sub_dev, struct dcmi_event_filter filter,
                            dcmi_fault_event_callback handler)
{
    if (handler == NULL) {
        return RC_BAD_PARAMETER;
    }
    g_cb = handler;
    g_sub_card = sub_card;
    g_sub_dev = sub_dev;
    g_sub_filter = filter;
    start_pending_events();
    return RC_OK;
}
#endif

static int board_locked(const struct chip *c, struct dcmi_board_info *board_info)
{
    if (board_info == NULL) {
        return RC_BAD_PARAMETER;
    }
    *board_info = c->board;
    return RC_OK;
}

/* HCCS counters (sub-command 5 as kept, 3 narrowed to 32 bits) and SIO CRC errors. g_mu held. */
static int counters_locked(const struct chip *c, int main_cmd, unsigned int sub_cmd, void *buf, unsigned int *size)
{
    if (main_cmd == DCMI_MAIN_CMD_SIO && sub_cmd == DCMI_SIO_SUB_CMD_CRC_ERR) {
        if (*size < sizeof(c->sio)) {
            return RC_BAD_PARAMETER;
        }
        memcpy(buf, &c->sio, sizeof(c->sio));
        *size = (unsigned int)sizeof(c->sio);
        return RC_OK;
    }
    if (main_cmd == DCMI_MAIN_CMD_HCCS && sub_cmd == DCMI_HCCS_SUB_CMD_STATISTIC_U64) {
        if (*size < sizeof(c->hccs)) {
            return RC_BAD_PARAMETER;
        }
        memcpy(buf, &c->hccs, sizeof(c->hccs));
        *size = (unsigned int)sizeof(c->hccs);
        return RC_OK;
    }
    if (main_cmd == DCMI_MAIN_CMD_HCCS && sub_cmd == DCMI_HCCS_SUB_CMD_STATISTIC) {
        struct dcmi_hccs_statistic_info narrow;
        if (*size < sizeof(narrow)) {
            return RC_BAD_PARAMETER;
        }
        memset(&narrow, 0, sizeof(narrow));
        for (int i = 0; i < HCCS_MAX_PCS_NUM; i++) {
            narrow.tx_cnt[i] = (unsigned int)c->hccs.tx_cnt[i];
            narrow.rx_cnt[i] = (unsigned int)c->hccs.rx_cnt[i];
            narrow.crc_err_cnt[i] = (unsigned int)c->hccs.crc_err_cnt[i];
        }
        memcpy(buf, &narrow, sizeof(narrow));
        *size = (unsigned int)sizeof(narrow);
        return RC_OK;
    }
    return RC_NOT_SUPPORTED;
}

/* Only the super-pod information: the binding asks this command and no other. *size is the
 * buffer's size on the way in and the bytes written on the way out. */
/* A vNPU of the chip, by the vdev_id the caller put in the query: the resource query answers its
 * identity and share (name, group, AI cores), the activity query its use (AI-core %, memory); each
 * leaves the other's fields zero, so a caller that mixes them up reads zeros. An id the chip does not
 * hold is refused, as the driver refuses it. */
static int vdev_query_locked(const struct chip *c, unsigned int sub_cmd, void *buf, unsigned int *size)
{
    if (sub_cmd != DCMI_VMNG_SUB_CMD_GET_VDEV_RESOURCE && sub_cmd != DCMI_VMNG_SUB_CMD_GET_VDEV_ACTIVITY) {
        return RC_NOT_SUPPORTED;
    }
    struct dcmi_vdev_query_stru *q = buf;
    if (*size < sizeof(*q)) {
        return RC_BAD_PARAMETER;
    }
    const struct vdev *v = NULL;
    for (int i = 0; i < c->nvdevs; i++) {
        if (c->vdevs[i].vdev_id == q->vdev_id) {
            v = &c->vdevs[i];
        }
    }
    if (v == NULL) {
        return RC_BAD_PARAMETER;
    }
    unsigned int id = q->vdev_id;
    memset(q, 0, sizeof(*q));
    q->vdev_id = id;
    if (sub_cmd == DCMI_VMNG_SUB_CMD_GET_VDEV_RESOURCE) {
        copy_str(q->query_info.name, sizeof(q->query_info.name), v->template_name);
        q->query_info.vfg_id = v->vfg_id;
        q->query_info.base.vfg_id = v->vfg_id;
        q->query_info.computing.aic = v->aic;
    } else {
        q->query_info.computing.vdev_aicore_utilization = v->aicore_util;
        q->query_info.computing.vdev_memory_total = v->mem_total;
        q->query_info.computing.vdev_memory_free = v->mem_free;
    }
    *size = (unsigned int)sizeof(*q);
    return RC_OK;
}

static int device_info_locked(const struct chip *c, int main_cmd, unsigned int sub_cmd, void *buf, unsigned int *size)
{
    if (buf == NULL || size == NULL) {
        return RC_BAD_PARAMETER;
    }
    if (main_cmd == DCMI_MAIN_CMD_HCCS || main_cmd == DCMI_MAIN_CMD_SIO) {
        return counters_locked(c, main_cmd, sub_cmd, buf, size);
    }
    if (main_cmd == DCMI_MAIN_CMD_VDEV_MNG) {
        return vdev_query_locked(c, sub_cmd, buf, size);
    }
    if (main_cmd != DCMI_MAIN_CMD_CHIP_INF || sub_cmd != DCMI_CHIP_INF_SUB_CMD_SPOD_INFO) {
        return RC_NOT_SUPPORTED;
    }
    if (*size < sizeof(c->spod)) {
        return RC_BAD_PARAMETER;
    }
    memcpy(buf, &c->spod, sizeof(c->spod));
    *size = (unsigned int)sizeof(c->spod);
    return RC_OK;
}

static int mainboard_locked(const struct chip *c, unsigned int *mainboard_id)
{
    if (mainboard_id == NULL) {
        return RC_BAD_PARAMETER;
    }
    *mainboard_id = c->mainboard_id;
    return RC_OK;
}

/* NDIE is not modelled (no caller asks it); DDIE only through v2, as the reference's v1
 * DcGetDieID refuses it. */
static int die_id_locked(const struct chip *c, int die_type, int v2, struct dcmi_die_id *die_id)
{
    const unsigned int *words;
    if (die_id == NULL) {
        return RC_BAD_PARAMETER;
    }
    if (die_type == DCMI_VDIE) {
        words = c->vdie;
    } else if (die_type == DCMI_DDIE && v2) {
        words = c->ddie;
    } else if (die_type == DCMI_NDIE) {
        return RC_NOT_SUPPORTED;
    } else {
        return RC_BAD_PARAMETER;
    }
    memcpy(die_id->soc_die, words, sizeof(die_id->soc_die));
    return RC_OK;
}

/* One urma device's EIDs (n of them, 16 raw bytes each); the chip's count grows to cover it. */
static int set_urma_locked(int logic, unsigned int index, int n, const unsigned char *raw)
{
    if (logic < 0 || logic >= MAX_CHIPS || !g_chips[logic].present || index >= MAX_URMA_DEVS || n < 0 ||
        n > DCMI_URMA_EID_MAX_COUNT || (n > 0 && raw == NULL)) {
        return -1;
    }
    struct chip *c = &g_chips[logic];
    c->urma_neids[index] = (unsigned int)n;
    c->urma_stored[index] = 1;
    memcpy(c->urma_eids[index], raw, (size_t)n * DCMI_URMA_EID_SIZE);
    if (c->urma_count < index + 1) {
        c->urma_count = index + 1;
    }
    return 0;
}

static int urma_count_locked(const struct chip *c, unsigned int *dev_cnt)
{
    if (dev_cnt == NULL) {
        return RC_BAD_PARAMETER;
    }
    *dev_cnt = c->urma_count;
    return RC_OK;
}

/* eid_cnt: in, the room of eid_list; out, the EIDs written. A device the chip counts but does not
 * store answers as the reference's driver answers an index it cannot read: an error. */
static int urma_eids_locked(const struct chip *c, unsigned int index, dcmi_urma_eid_info_t *eid_list,
                            unsigned int *eid_cnt)
{
    if (eid_list == NULL || eid_cnt == NULL || index >= c->urma_count) {
        return RC_BAD_PARAMETER;
    }
    if (index >= MAX_URMA_DEVS || !c->urma_stored[index]) {
        return RC_BAD_PARAMETER;
    }
    unsigned int n = c->urma_neids[index];
    if (n > *eid_cnt) {
        return RC_BAD_PARAMETER;
    }
    for (unsigned int j = 0; j < n; j++) {
        memset(&eid_list[j], 0, sizeof(eid_list[j]));
        memcpy(eid_list[j].eid.raw, c->urma_eids[index][j], DCMI_URMA_EID_SIZE);
        eid_list[j].eid_index = j;
    }
    *eid_cnt = n;
    return RC_OK;
}

static int affinity_locked(const struct chip *c, char *affinity_cpu, int *length)
{
    if (affinity_cpu == NULL || length == NULL) {
        return RC_BAD_PARAMETER;
    }
    if (c->affinity[0] == '\0') {
        return RC_NOT_SUPPORTED;
    }
    /* the driver writes at most TOPO_INFO_MAX_LENTH (32) bytes and reports the length */
    copy_str(affinity_cpu, 32, c->affinity);
    *length = (int)strlen(affinity_cpu);
    return RC_OK;
}

static int pre_reset_locked(struct chip *c)
{
    c->pre_reset_done = 1;
    log_step(c, "pre_reset");
    return RC_OK;
}

static int rescan_locked(struct chip *c)
{
    log_step(c, "rescan");
    return RC_OK;
}

/* ----- v1: dcmi_*, a chip is (card, dev) ------------------------------------------------------ */

EXPORT int dcmi_init(void)
{
    GLOBAL_ENTRY(FN_INIT);
    ANSWER(init_locked(FN_INIT));
}

EXPORT int dcmi_get_dcmi_version(char *buf, int size)
{
    GLOBAL_CALL(FN_VERSION);
    ANSWER(version_locked(buf, size));
}

EXPORT int dcmi_get_card_list(int *card_num, int *card_list, int list_len)
{
    maybe_reload_config();
    GLOBAL_CALL(FN_CARD_LIST);
    if (card_num == NULL || card_list == NULL || list_len <= 0) {
        RETURN(RC_BAD_PARAMETER);
    }
    int n = 0;
    for (int i = 0; i < g_nchips; i++) {
        int card = g_chips[g_order[i]].card, seen = 0;
        for (int j = 0; j < n; j++) {
            seen |= card_list[j] == card;
        }
        if (!seen) {
            if (n == list_len) {
                RETURN(RC_BAD_PARAMETER);
            }
            card_list[n++] = card;
        }
    }
    *card_num = n;
    RETURN(RC_OK);
}

EXPORT int dcmi_get_device_num_in_card(int card_id, int *device_num)
{
    GLOBAL_CALL(FN_DEVICE_NUM);
    if (device_num == NULL) {
        RETURN(RC_BAD_PARAMETER);
    }
    int n = 0;
    for (int i = 0; i < g_nchips; i++) {
        n += g_chips[g_order[i]].card == card_id;
    }
    if (n == 0) {
        RETURN(RC_INVALID_DEVICE);
    }
    *device_num = n;
    RETURN(RC_OK);
}

EXPORT int dcmi_get_device_logic_id(int *device_logic_id, int card_id, int device_id)
{
    CHIP_CALL(FN_LOGIC_ID, card_id, device_id);
    (void)c;
    if (device_logic_id == NULL) {
        RETURN(RC_BAD_PARAMETER);
    }
    *device_logic_id = logic_;
    RETURN(RC_OK);
}

EXPORT int dcmi_get_device_phyid_from_logicid(unsigned int logicid, unsigned int *phyid)
{
    GLOBAL_CALL(FN_PHY_FROM_LOGIC);
    ANSWER(phy_locked(FN_PHY_FROM_LOGIC, logicid, phyid));
}

EXPORT int dcmi_get_device_logicid_from_phyid(unsigned int phyid, unsigned int *logicid)
{
    GLOBAL_CALL(FN_LOGIC_FROM_PHY);
    if (logicid == NULL) {
        RETURN(RC_BAD_PARAMETER);
    }
    for (int i = 0; i < g_nchips; i++) {
        if ((unsigned int)g_chips[g_order[i]].phy == phyid) {
            *logicid = (unsigned int)g_order[i];
            RETURN(RC_OK);
        }
    }
    RETURN(RC_INVALID_DEVICE);
}

EXPORT int dcmi_get_card_id_device_id_from_logicid(int *card_id, int *device_id, unsigned int device_logic_id)
{
    GLOBAL_CALL(FN_CARD_DEV_FROM_LOGIC);
    if (card_id == NULL || device_id == NULL) {
        RETURN(RC_BAD_PARAMETER);
    }
    if (device_logic_id >= MAX_CHIPS || !g_chips[device_logic_id].present) {
        RETURN(RC_INVALID_DEVICE);
    }
    *card_id = g_chips[device_logic_id].card;
    *device_id = g_chips[device_logic_id].dev;
    RETURN(RC_OK);
}

EXPORT int dcmi_get_device_chip_info(int card_id, int device_id, struct dcmi_chip_info *info)
{
    CHIP_CALL(FN_CHIP_INFO, card_id, device_id);
    if (info == NULL) {
        RETURN(RC_BAD_PARAMETER);
    }
    memset(info, 0, sizeof(*info));
    memcpy(info->chip_type, c->chip_type, sizeof(info->chip_type));
    memcpy(info->chip_name, c->chip_name, sizeof(info->chip_name));
    memcpy(info->chip_ver, c->chip_ver, sizeof(info->chip_ver));
    info->aicore_cnt = c->aicore;
    RETURN(RC_OK);
}

EXPORT int dcmi_get_device_chip_info_v2(int card_id, int device_id, struct dcmi_chip_info_v2 *info)
{
    CHIP_CALL(FN_CHIP_INFO_V2, card_id, device_id);
    ANSWER(chip_info_v2_locked(c, info));
}

EXPORT int dcmi_get_device_health(int card_id, int device_id, unsigned int *health)
{
    maybe_reload_config();
    CHIP_CALL(FN_HEALTH, card_id, device_id);
    ANSWER(health_locked(c, health));
}

EXPORT int dcmi_get_device_errorcode_v2(int card_id, int device_id, int *error_count, unsigned int *error_code_list,
                                        unsigned int list_len)
{
    CHIP_CALL(FN_ERRORCODE_V2, card_id, device_id);
    ANSWER(codes_locked(c, error_count, error_code_list, list_len));
}

EXPORT int dcmi_get_device_network_health(int card_id, int device_id, int *result)
{
    CHIP_CALL(FN_NETWORK_HEALTH, card_id, device_id);
    ANSWER(int_locked(c->network_health, result));
}

EXPORT int dcmi_get_device_ip(int card_id, int device_id, int port_type, int port_id, struct dcmi_ip_addr *ip,
                              struct dcmi_ip_addr *mask)
{
    CHIP_CALL(FN_IP, card_id, device_id);
    if (ip == NULL || mask == NULL || port_type != 1 || port_id != 0) {
        RETURN(RC_BAD_PARAMETER);
    }
    if (c->ip_type < 0) {
        RETURN(RC_NOT_SUPPORTED);
    }
    memset(ip, 0, sizeof(*ip));
    memset(mask, 0, sizeof(*mask));
    memcpy(ip->u_addr.ip6, c->ip, sizeof(c->ip));
    ip->ip_type = c->ip_type;
    memcpy(mask->u_addr.ip6, c->mask, sizeof(c->mask));
    mask->ip_type = c->ip_type;
    RETURN(RC_OK);
}

EXPORT int dcmi_get_device_temperature(int card_id, int device_id, int *temperature)
{
    CHIP_CALL(FN_TEMPERATURE, card_id, device_id);
    ANSWER(int_locked(c->temperature, temperature));
}

EXPORT int dcmi_get_device_power_info(int card_id, int device_id, int *power)
{
    CHIP_CALL(FN_POWER, card_id, device_id);
    ANSWER(int_locked(c->power, power));
}

EXPORT int dcmi_get_device_hbm_info(int card_id, int device_id, struct dcmi_hbm_info *hbm_info)
{
    CHIP_CALL(FN_HBM, card_id, device_id);
    ANSWER(hbm_locked(c, hbm_info));
}

EXPORT int dcmi_get_device_utilization_rate(int card_id, int device_id, int input_type, unsigned int *rate)
{
    CHIP_CALL(FN_UTILIZATION, card_id, device_id);
    ANSWER(utilization_locked(c, input_type, rate));
}

EXPORT int dcmi_get_device_resource_info(int card_id, int device_id, struct dcmi_proc_mem_info *proc_info,
                                         int *proc_num)
{
    CHIP_CALL(FN_RESOURCE_INFO, card_id, device_id);
    ANSWER(procs_locked(c, proc_info, proc_num));
}

EXPORT int dcmi_set_device_reset(int card_id, int device_id, int channel_type)
{
    CHIP_CALL(FN_RESET, card_id, device_id);
    ANSWER(reset_locked(c, channel_type));
}

EXPORT int dcmi_get_device_boot_status(int card_id, int device_id, int *boot_status)
{
    CHIP_CALL(FN_BOOT_STATUS, card_id, device_id);
    ANSWER(boot_status_locked(c, boot_status));
}

EXPORT int dcmi_create_vdevice(int card_id, int device_id, struct dcmi_create_vdev_res_stru *vdev,
                               struct dcmi_create_vdev_out *out)
{
    CHIP_CALL(FN_CREATE_VDEV, card_id, device_id);
    if (vdev == NULL || out == NULL || memchr(vdev->template_name, '\0', sizeof(vdev->template_name)) == NULL) {
        RETURN(RC_BAD_PARAMETER);
    }
    c->req_vdev = vdev->vdev_id;
    c->req_vfg = vdev->vfg_id;
    copy_str(c->req_template, sizeof(c->req_template), vdev->template_name);
    if (c->nvdevs == MAX_VDEVS || vdev->template_name[0] == '\0') {
        RETURN(RC_BAD_PARAMETER);
    }
    unsigned int id = vdev->vdev_id == 0xFFFFFFFFu ? g_next_vdev++ : vdev->vdev_id;
    unsigned int vfg = vdev->vfg_id == 0xFFFFFFFFu ? c->next_vfg++ : vdev->vfg_id;
    for (int i = 0; i < c->nvdevs; i++) {
        if (c->vdevs[i].vdev_id == id) {
            RETURN(RC_BAD_PARAMETER);
        }
    }
    struct vdev *v = &c->vdevs[c->nvdevs++];
    memset(v, 0, sizeof(*v)); /* the slot may hold a destroyed vNPU's readings */
    v->vdev_id = id;
    v->vfg_id = vfg;
    copy_str(v->template_name, sizeof(v->template_name), vdev->template_name);
    unsigned int cores = 0;
    if (sscanf(v->template_name, "vir%u", &cores) == 1) { /* vir02, vir04_3c, vir05_1c_16g: NN AI cores */
        v->aic = (float)cores;
    }
    memset(out, 0, sizeof(*out));
    out->vdev_id = id;
    out->vfg_id = vfg;
    out->pcie_bus = (unsigned int)(0x80 + c->phy);
    RETURN(RC_OK);
}

EXPORT int dcmi_set_destroy_vdevice(int card_id, int device_id, unsigned int vdevid)
{
    CHIP_CALL(FN_DESTROY_VDEV, card_id, device_id);
    for (int i = 0; i < c->nvdevs; i++) {
        if (c->vdevs[i].vdev_id == vdevid) {
            c->vdevs[i] = c->vdevs[--c->nvdevs];
            RETURN(RC_OK);
        }
    }
    RETURN(RC_BAD_PARAMETER);
}

#ifndef DOUBLE_NO_SUBSCRIBE
EXPORT int dcmi_subscribe_fault_event(int card_id, int device_id, struct dcmi_event_filter filter,
                                      dcmi_fault_event_callback handler)
{
    GLOBAL_CALL(FN_SUBSCRIBE);
    if ((card_id == -1) != (device_id == -1)) {
        RETURN(RC_BAD_PARAMETER);
    }
    if (card_id != -1 && logic_of(card_id, device_id) < 0) {
        RETURN(RC_INVALID_DEVICE);
    }
    ANSWER(subscribe_locked(card_id, device_id, filter, handler));
}

EXPORT int dcmi_get_netdev_brother_device(int card_id, int device_id, int *brother_card_id)
{
    CHIP_CALL(FN_BROTHER, card_id, device_id);
    ANSWER(int_locked(c->brother_card, brother_card_id));
}
#endif

EXPORT int dcmi_get_device_board_info(int card_id, int device_id, struct dcmi_board_info *board_info)
{
    CHIP_CALL(FN_BOARD_INFO, card_id, device_id);
    ANSWER(board_locked(c, board_info));
}

EXPORT int dcmi_get_product_type(int card_id, int device_id, char *product_type_str, int buf_size)
{
    CHIP_CALL(FN_PRODUCT_TYPE, card_id, device_id);
    if (product_type_str == NULL || buf_size <= 0 || (size_t)buf_size <= strlen(c->product_type)) {
        RETURN(RC_BAD_PARAMETER);
    }
    copy_str(product_type_str, (size_t)buf_size, c->product_type);
    RETURN(RC_OK);
}

EXPORT int dcmi_get_device_type(int card_id, int device_id, int *device_type)
{
    CHIP_CALL(FN_DEVICE_TYPE, card_id, device_id);
    ANSWER(int_locked(c->unit_type, device_type));
}

EXPORT int dcmi_get_device_info(int card_id, int device_id, int main_cmd, unsigned int sub_cmd, void *buf,
                                unsigned int *size)
{
    CHIP_CALL(FN_DEVICE_INFO, card_id, device_id);
    ANSWER(device_info_locked(c, main_cmd, sub_cmd, buf, size));
}

EXPORT int dcmi_get_mainboard_id(int card_id, int device_id, unsigned int *mainboard_id)
{
    CHIP_CALL(FN_MAINBOARD_ID, card_id, device_id);
    ANSWER(mainboard_locked(c, mainboard_id));
}

EXPORT int dcmi_get_device_die_v2(int card_id, int device_id, int input_type, struct dcmi_die_id *die_id)
{
    CHIP_CALL(FN_DIE_ID, card_id, device_id);
    ANSWER(die_id_locked(c, input_type, 0, die_id));
}

EXPORT int dcmi_get_urma_device_cnt(int card_id, int device_id, unsigned int *dev_cnt)
{
    CHIP_CALL(FN_URMA_CNT, card_id, device_id);
    ANSWER(urma_count_locked(c, dev_cnt));
}

EXPORT int dcmi_get_eid_list_by_urma_dev_index(int card_id, int device_id, unsigned int dev_index,
                                               dcmi_urma_eid_info_t *eid_list, unsigned int *eid_cnt)
{
    CHIP_CALL(FN_URMA_EIDS, card_id, device_id);
    ANSWER(urma_eids_locked(c, dev_index, eid_list, eid_cnt));
}

EXPORT int dcmi_get_affinity_cpu_info_by_device_id(int card_id, int device_id, char *affinity_cpu, int *length)
{
    CHIP_CALL(FN_AFFINITY, card_id, device_id);
    ANSWER(affinity_locked(c, affinity_cpu, length));
}

EXPORT int dcmi_get_device_outband_channel_state(int card_id, int device_id, int *channel_state)
{
    CHIP_CALL(FN_OUTBAND_STATE, card_id, device_id);
    ANSWER(int_locked(c->outband_state, channel_state));
}

EXPORT int dcmi_pre_reset_soc(int card_id, int device_id)
{
    CHIP_CALL(FN_PRE_RESET, card_id, device_id);
    ANSWER(pre_reset_locked(c));
}

EXPORT int dcmi_rescan_soc(int card_id, int device_id)
{
    CHIP_CALL(FN_RESCAN, card_id, device_id);
    ANSWER(rescan_locked(c));
}

/* ----- v2: dcmiv2_*, a chip is its logic id (the 950 drivers) ------------------------------------ */

EXPORT int dcmiv2_init(void)
{
    GLOBAL_ENTRY(FN_V2_INIT);
    ANSWER(init_locked(FN_V2_INIT));
}

EXPORT int dcmiv2_get_dcmi_version(char *buf, int size)
{
    GLOBAL_CALL(FN_V2_VERSION);
    ANSWER(version_locked(buf, size));
}

/* The logic ids, in (card, dev) order; the list comes FIRST, then the count. */
EXPORT int dcmiv2_get_device_list(int *device_list, int *device_num, int list_len)
{
    maybe_reload_config();
    GLOBAL_CALL(FN_V2_DEVICE_LIST);
    if (device_list == NULL || device_num == NULL || list_len < g_nchips) {
        RETURN(RC_BAD_PARAMETER);
    }
    for (int i = 0; i < g_nchips; i++) {
        device_list[i] = g_order[i];
    }
    *device_num = g_nchips;
    RETURN(RC_OK);
}

EXPORT int dcmiv2_get_chip_phy_id_by_dev_id(unsigned int dev_id, unsigned int *phyid)
{
    GLOBAL_CALL(FN_V2_PHY_ID);
    ANSWER(phy_locked(FN_V2_PHY_ID, dev_id, phyid));
}

EXPORT int dcmiv2_get_device_chip_info(int dev_id, struct dcmi_chip_info_v2 *chip_info)
{
    LOGIC_CALL(FN_V2_CHIP_INFO, dev_id);
    ANSWER(chip_info_v2_locked(c, chip_info));
}

EXPORT int dcmiv2_get_device_board_info(int dev_id, struct dcmi_board_info *board_info)
{
    LOGIC_CALL(FN_V2_BOARD_INFO, dev_id);
    ANSWER(board_locked(c, board_info));
}

EXPORT int dcmiv2_get_device_type(int dev_id, int *device_type)
{
    LOGIC_CALL(FN_V2_DEVICE_TYPE, dev_id);
    ANSWER(int_locked(c->unit_type, device_type));
}

EXPORT int dcmiv2_get_device_info(int dev_id, int main_cmd, unsigned int sub_cmd, void *buf, unsigned int *size)
{
    LOGIC_CALL(FN_V2_DEVICE_INFO, dev_id);
    ANSWER(device_info_locked(c, main_cmd, sub_cmd, buf, size));
}

EXPORT int dcmiv2_get_mainboard_id(int dev_id, unsigned int *mainboard_id)
{
    LOGIC_CALL(FN_V2_MAINBOARD_ID, dev_id);
    ANSWER(mainboard_locked(c, mainboard_id));
}

EXPORT int dcmiv2_get_device_die_id(int dev_id, int input_type, struct dcmi_die_id *die_id)
{
    LOGIC_CALL(FN_V2_DIE_ID, dev_id);
    ANSWER(die_id_locked(c, input_type, 1, die_id));
}

EXPORT int dcmiv2_get_urma_device_cnt(int dev_id, unsigned int *dev_cnt)
{
    LOGIC_CALL(FN_V2_URMA_CNT, dev_id);
    ANSWER(urma_count_locked(c, dev_cnt));
}

EXPORT int dcmiv2_get_eid_list_by_urma_dev_index(int dev_id, unsigned int dev_index, dcmi_urma_eid_info_t *eid_list,
                                                 unsigned int *eid_cnt)
{
    LOGIC_CALL(FN_V2_URMA_EIDS, dev_id);
    ANSWER(urma_eids_locked(c, dev_index, eid_list, eid_cnt));
}

EXPORT int dcmiv2_get_affinity_cpu_info_by_dev_id(int dev_id, char *affinity_cpu, int *len)
{
    LOGIC_CALL(FN_V2_AFFINITY, dev_id);
    ANSWER(affinity_locked(c, affinity_cpu, len));
}

EXPORT int dcmiv2_get_device_health(int dev_id, unsigned int *health)
{
    maybe_reload_config();
    LOGIC_CALL(FN_V2_HEALTH, dev_id);
    ANSWER(health_locked(c, health));
}

EXPORT int dcmiv2_get_device_error_code_list(int dev_id, int *error_count, unsigned int *error_code_list,
                                             unsigned int list_len)
{
    LOGIC_CALL(FN_V2_ERROR_CODES, dev_id);
    ANSWER(codes_locked(c, error_count, error_code_list, list_len));
}

EXPORT int dcmiv2_get_device_network_health(int dev_id, int *result)
{
    LOGIC_CALL(FN_V2_NETWORK_HEALTH, dev_id);
    ANSWER(int_locked(c->network_health, result));
}

EXPORT int dcmiv2_get_device_temperature(int dev_id, int *temperature)
{
    LOGIC_CALL(FN_V2_TEMPERATURE, dev_id);
    ANSWER(int_locked(c->temperature, temperature));
}

EXPORT int dcmiv2_get_device_power_info(int dev_id, int *power)
{
    LOGIC_CALL(FN_V2_POWER, dev_id);
    ANSWER(int_locked(c->power, power));
}

EXPORT int dcmiv2_get_device_hbm_info(int dev_id, struct dcmi_hbm_info *hbm_info)
{
    LOGIC_CALL(FN_V2_HBM, dev_id);
    ANSWER(hbm_locked(c, hbm_info));
}

EXPORT int dcmiv2_get_device_utilization_rate(int dev_id, int input_type, unsigned int *utilization_rate)
{
    LOGIC_CALL(FN_V2_UTILIZATION, dev_id);
    ANSWER(utilization_locked(c, input_type, utilization_rate));
}

EXPORT int dcmiv2_get_device_proc_mem_info(int dev_id, struct dcmi_proc_mem_info *proc_info, int *proc_num)
{
    LOGIC_CALL(FN_V2_PROC_MEM, dev_id);
    ANSWER(procs_locked(c, proc_info, proc_num));
}

EXPORT int dcmiv2_get_device_boot_status(int dev_id, int *boot_status)
{
    LOGIC_CALL(FN_V2_BOOT_STATUS, dev_id);
    ANSWER(boot_status_locked(c, boot_status));
}

#ifndef DOUBLE_NO_SUBSCRIBE
/* dev_id -1: every chip. The callback is the 3rd argument (the reference's dcmi_v2.go). */
EXPORT int dcmiv2_subscribe_fault_event(int dev_id, struct dcmi_event_filter filter,
                                        dcmi_fault_event_callback handler)
{
    GLOBAL_CALL(FN_V2_SUBSCRIBE);
    if (dev_id != -1 && (dev_id < 0 || dev_id >= MAX_CHIPS || !g_chips[dev_id].present)) {
        RETURN(RC_INVALID_DEVICE);
    }
    ANSWER(subscribe_locked(dev_id, dev_id, filter, handler));
}
#endif

EXPORT int dcmiv2_reset_device(int dev_id, int channel_type)
{
    LOGIC_CALL(FN_V2_RESET, dev_id);
    ANSWER(reset_locked(c, channel_type));
}

EXPORT int dcmiv2_get_device_outband_channel_state(int dev_id, int *channel_state)
{
    LOGIC_CALL(FN_V2_OUTBAND_STATE, dev_id);
    ANSWER(int_locked(c->outband_state, channel_state));
}

EXPORT int dcmiv2_pre_reset_device(int dev_id)
{
    LOGIC_CALL(FN_V2_PRE_RESET, dev_id);
    ANSWER(pre_reset_locked(c));
}

EXPORT int dcmiv2_rescan_device(int dev_id)
{
    LOGIC_CALL(FN_V2_RESCAN, dev_id);
    ANSWER(rescan_locked(c));
}

/* ------------------------------------------------------------------------------------------ */
/* Control API (tests only). logic -1 means "every chip" unless said otherwise.                  */

static void lock_model(void)
{
    pthread_once(&g_once, init_once);
    pthread_mutex_lock(&g_mu);
}

/* Back to the default model: default layout and values, no overrides, no hangs (blocked calls
 * return), no subscription, no config file, zero call counts. Call it at the start of each test. */
EXPORT void dcmi_double_reset(void)
{
    lock_model();
    g_config_path[0] = '\0';
    reset_model(0);
    pthread_mutex_unlock(&g_mu);
}

/* n chips; chip i sits at (cards[i], devs[i]) with logic id logics[i] (< 64) and phy id phys[i].
 * Card order of dcmi_get_card_list follows the first appearance of each card. */
EXPORT int dcmi_double_set_layout(int n, const int *cards, const int *devs, const int *logics, const int *phys)
{
    if (n < 0 || n > MAX_CHIPS) {
        return -1;
    }
    lock_model();
    clear_layout();
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        rc = add_chip(cards[i], devs[i], logics[i], phys[i]);
    }
    g_generation++;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
    return rc;
}

/* Make `function` ("*" = every function) return rc for chip `logic` (-1 = any chip and the calls
 * that address no chip). rc 0 removes the override. */
EXPORT int dcmi_double_set_rc(const char *function, int logic, int rc)
{
    int fn = strcmp(function, "*") == 0 ? -1 : fn_index(function);
    if (fn == -2) {
        return -1;
    }
    lock_model();
    int r = set_override(fn, logic, rc);
    pthread_mutex_unlock(&g_mu);
    return r;
}

/* Calls for the chip block: ms < 0 until dcmi_double_release, ms > 0 each call takes ms. */
EXPORT int dcmi_double_hang(int logic, int ms)
{
    lock_model();
    int rc = set_hang_locked(logic, ms);
    pthread_mutex_unlock(&g_mu);
    return rc;
}

EXPORT int dcmi_double_release(int logic)
{
    /* not via dcmi_double_hang: an exported symbol could be interposed by another loaded copy */
    lock_model();
    int rc = set_hang_locked(logic, 0);
    pthread_mutex_unlock(&g_mu);
    return rc;
}

/* Number of calls blocked in a hang right now. */
EXPORT int dcmi_double_hanging(void)
{
    lock_model();
    int n = g_hanging;
    pthread_mutex_unlock(&g_mu);
    return n;
}

EXPORT int dcmi_double_set_codes(int logic, int n, const unsigned int *codes)
{
    lock_model();
    int rc = set_codes_locked(logic, n, codes);
    pthread_mutex_unlock(&g_mu);
    return rc;
}

EXPORT int dcmi_double_set_int(const char *field, int logic, long long value)
{
    lock_model();
    int rc = apply_to(logic, int_thunk, field, &value);
    pthread_mutex_unlock(&g_mu);
    return rc;
}

EXPORT int dcmi_double_set_str(const char *field, int logic, const char *value)
{
    lock_model();
    int rc = apply_to(logic, str_thunk, field, value);
    pthread_mutex_unlock(&g_mu);
    return rc;
}

/* A vNPU's readings: field aic (AI cores, the resource query), aicore_util (%), mem_total, mem_free
 * (the activity query). -1 when the chip holds no such vNPU or the field is unknown. */
EXPORT int dcmi_double_set_vdev(int logic, unsigned int vdev_id, const char *field, long long value)
{
    lock_model();
    int rc = -1;
    if (logic >= 0 && logic < MAX_CHIPS && g_chips[logic].present && field != NULL) {
        struct chip *c = &g_chips[logic];
        for (int i = 0; i < c->nvdevs; i++) {
            struct vdev *v = &c->vdevs[i];
            if (v->vdev_id != vdev_id) {
                continue;
            }
            rc = 0;
            if (strcmp(field, "aic") == 0) {
                v->aic = (float)value;
            } else if (strcmp(field, "aicore_util") == 0) {
                v->aicore_util = (unsigned int)value;
            } else if (strcmp(field, "mem_total") == 0) {
                v->mem_total = (unsigned long long)value;
            } else if (strcmp(field, "mem_free") == 0) {
                v->mem_free = (unsigned long long)value;
            } else {
                rc = -1;
            }
        }
    }
    pthread_mutex_unlock(&g_mu);
    return rc;
}

/* One urma device of the chip: n EIDs of 16 raw bytes each (index >= the count grows it). */
EXPORT int dcmi_double_set_urma(int logic, unsigned int index, int n, const unsigned char *raw)
{
    lock_model();
    int rc = set_urma_locked(logic, index, n, raw);
    pthread_mutex_unlock(&g_mu);
    return rc;
}

EXPORT int dcmi_double_set_procs(int logic, int n, const int *pids, const unsigned long *mem_bytes)
{
    if (n < 0 || n > DCMI_MAX_PROCS) {
        return -1;
    }
    lock_model();
    if (logic < 0 || logic >= MAX_CHIPS || !g_chips[logic].present) {
        pthread_mutex_unlock(&g_mu);
        return -1;
    }
    struct chip *c = &g_chips[logic];
    for (int i = 0; i < n; i++) {
        c->pids[i] = pids[i];
        c->proc_mem[i] = mem_bytes[i];
    }
    c->nprocs = n;
    pthread_mutex_unlock(&g_mu);
    return 0;
}

/* Calls the subscribed callback from a new thread and waits for it to return.
 * Returns 0 when delivered, -1 when nobody subscribed, -2 when no thread could be started. */
EXPORT int dcmi_double_fire_event(int type, int logic, unsigned int event_id, int severity, int assertion,
                                  unsigned long long raised_time, const char *name)
{
    lock_model();
    int subscribed = g_cb != NULL;
    pthread_mutex_unlock(&g_mu);
    if (!subscribed) {
        return -1;
    }
    struct delivery *d = malloc(sizeof(*d));
    if (d == NULL) {
        return -2;
    }
    d->delay_ms = 0;
    build_event(&d->ev, type, logic, event_id, severity, assertion, raised_time, name);
    pthread_t t;
    if (pthread_create(&t, NULL, deliver, d) != 0) {
        free(d);
        return -2;
    }
    pthread_join(t, NULL);
    return 0;
}

/* 1 when a callback is registered, with the arguments it was registered with. */
EXPORT int dcmi_double_subscription(int *card, int *dev, struct dcmi_event_filter *filter)
{
    lock_model();
    int subscribed = g_cb != NULL;
    if (card != NULL) {
        *card = g_sub_card;
    }
    if (dev != NULL) {
        *dev = g_sub_dev;
    }
    if (filter != NULL) {
        *filter = g_sub_filter;
    }
    pthread_mutex_unlock(&g_mu);
    return subscribed;
}

/* Calls of `function` for chip `logic`; -1 counts every call, -2 only the calls for no chip. */
EXPORT int dcmi_double_call_count(const char *function, int logic)
{
    int fn = fn_index(function);
    if (fn < 0 || logic < -2 || logic >= MAX_CHIPS) {
        return -1;
    }
    lock_model();
    int n = 0;
    if (logic == -1) {
        for (int i = 0; i <= MAX_CHIPS; i++) {
            n += g_counts[fn][i];
        }
    } else {
        n = g_counts[fn][logic == -2 ? NO_CHIP : logic];
    }
    pthread_mutex_unlock(&g_mu);
    return n;
}

/* The reset steps the chip saw since the last dcmi_double_reset, comma-joined
 * (pre_reset, reset:inband, reset:outband, rescan); returns the last reset channel or -1. */
EXPORT int dcmi_double_reset_log(int logic, char *buf, int len)
{
    if (logic < 0 || logic >= MAX_CHIPS || buf == NULL || len <= 0) {
        return -2;
    }
    lock_model();
    copy_str(buf, (size_t)len, g_chips[logic].reset_log);
    int channel = g_chips[logic].last_reset_channel;
    pthread_mutex_unlock(&g_mu);
    return channel;
}

/* What the last dcmi_create_vdevice for the chip asked for; returns the chip's vNPU count. */
EXPORT int dcmi_double_vdev_request(int logic, unsigned int *vdev_id, unsigned int *vfg_id, char *template_name,
                                    int len)
{
    if (logic < 0 || logic >= MAX_CHIPS) {
        return -1;
    }
    lock_model();
    const struct chip *c = &g_chips[logic];
    if (vdev_id != NULL) {
        *vdev_id = c->req_vdev;
    }
    if (vfg_id != NULL) {
        *vfg_id = c->req_vfg;
    }
    if (template_name != NULL && len > 0) {
        copy_str(template_name, (size_t)len, c->req_template);
    }
    int n = c->nvdevs;
    pthread_mutex_unlock(&g_mu);
    return n;
}

/* Applies a config file now (same format as DCMI_DOUBLE_CONFIG). Returns 0, -1 when the file
 * cannot be read, or the number of the first invalid line. */
EXPORT int dcmi_double_load_config(const char *path)
{
    lock_model();
    int rc = load_config_locked(path);
    pthread_mutex_unlock(&g_mu);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* The A3's multi-die policy (enum dcmi_multi_die_policy: 0 union, 1 independent, 2 max).        */

#define MAX_DIE_POLICY_LOG 16
static unsigned int g_die_policies[MAX_DIE_POLICY_LOG]; /* in call order; the call count is its length */

#ifndef DOUBLE_NO_SUBSCRIBE
/* Records the policy asked for, then answers: an rc override, -8001 for a value past the enum, or 0. */
EXPORT int dcmi_set_multi_die_policy(unsigned int policy)
{
    GLOBAL_ENTRY(FN_SET_MULTI_DIE_POLICY);
    int n = g_counts[FN_SET_MULTI_DIE_POLICY][NO_CHIP];
    if (n <= MAX_DIE_POLICY_LOG) {
        g_die_policies[n - 1] = policy;
    }
    int rc = override_rc(FN_SET_MULTI_DIE_POLICY, -1);
    ANSWER(rc != RC_OK ? rc : policy > 1 ? RC_BAD_PARAMETER : RC_OK);
}
#endif

/* The policies dcmi_set_multi_die_policy was called with since the last reset, in order: copies at
 * most len of them into out and returns how many calls there were. */
EXPORT int dcmi_double_die_policies(unsigned int *out, int len)
{
    lock_model();
    int n = g_counts[FN_SET_MULTI_DIE_POLICY][NO_CHIP];
    for (int i = 0; i < n && i < len && i < MAX_DIE_POLICY_LOG; i++) {
        out[i] = g_die_policies[i];
    }
    pthread_mutex_unlock(&g_mu);
    return n;
}

/* metrics (npu-exporter parity): voltage, AI-core frequency, HBM ECC, PCIe bandwidth, multi util */

/* Fields: voltage (0.01 V), aicore_freq (MHz), util_vector / util_cube / util_overall, ecc_enable,
 * ecc_single / ecc_double / ecc_total_single / ecc_total_double / ecc_single_pages / ecc_double_pages,
 * pcie_<tx|rx>_<p|np|cpl>_<min|max|avg> (MB/ms). g_mu held. */
static int metrics_field(struct chip *c, const char *field, long long v)
{
    static const char *const ecc[] = {"ecc_enable", "ecc_single", "ecc_double", "ecc_total_single",
                                      "ecc_total_double", "ecc_single_pages", "ecc_double_pages"};
    static const char *const bw_names[] = {"tx_p", "tx_np", "tx_cpl", "rx_p", "rx_np", "rx_cpl"};
    static const char *const stats[] = {"min", "max", "avg"};
    if (strcmp(field, "voltage") == 0) {
        c->voltage = (unsigned int)v;
        return 0;
    }
    if (strcmp(field, "aicore_freq") == 0) {
        c->aicore_freq = (unsigned int)v;
        return 0;
    }
    if (strcmp(field, "util_vector") == 0) {
        c->util_vector = (unsigned int)v;
        return 0;
    }
    if (strcmp(field, "util_cube") == 0) {
        c->util_cube = (unsigned int)v;
        return 0;
    }
    if (strcmp(field, "util_overall") == 0) {
        c->util_overall = (unsigned int)v;
        return 0;
    }
    unsigned int *ecc_slots[] = {NULL, &c->hbm_ecc.single_bit_error_cnt, &c->hbm_ecc.double_bit_error_cnt,
                                 &c->hbm_ecc.total_single_bit_error_cnt, &c->hbm_ecc.total_double_bit_error_cnt,
                                 &c->hbm_ecc.single_bit_isolated_pages_cnt, &c->hbm_ecc.double_bit_isolated_pages_cnt};
    for (int i = 0; i < 7; i++) {
        if (strcmp(field, ecc[i]) == 0) {
            if (i == 0) {
                c->hbm_ecc.enable_flag = (int)v;
            } else {
                *ecc_slots[i] = (unsigned int)v;
            }
            return 0;
        }
    }
    if (hccs_field(c, field, v) == 0) {
        return 0;
    }
    if (hccs_field(c, field, v) == 0) {
        return 0;
    }
    unsigned int *bw[] = {c->pcie.tx_p_bw, c->pcie.tx_np_bw, c->pcie.tx_cpl_bw,
                          c->pcie.rx_p_bw, c->pcie.rx_np_bw, c->pcie.rx_cpl_bw};
    char name[48];
    for (int i = 0; i < 6; i++) {
        for (int j = 0; j < 3; j++) {
            snprintf(name, sizeof(name), "pcie_%s_%s", bw_names[i], stats[j]);
            if (strcmp(field, name) == 0) {
                bw[i][j] = (unsigned int)v;
                return 0;
            }
        }
    }
    return -1;
}

/* Fields: hccs_tx_<port> / hccs_rx_<port> / hccs_crc_<port> (counters), hccs_bw_tx_<port> /
 * hccs_bw_rx_<port> / hccs_bw_total_tx / hccs_bw_total_rx (hundredths of MB/s), sio_tx / sio_rx,
 * mem_total / mem_avail (MB). g_mu held. */
static int hccs_field(struct chip *c, const char *field, long long v)
{
    int port = -1;
    if (sscanf(field, "hccs_tx_%d", &port) == 1 && port >= 0 && port < HCCS_MAX_PCS_NUM) {
        c->hccs.tx_cnt[port] = (unsigned long long)v;
    } else if (sscanf(field, "hccs_rx_%d", &port) == 1 && port >= 0 && port < HCCS_MAX_PCS_NUM) {
        c->hccs.rx_cnt[port] = (unsigned long long)v;
    } else if (sscanf(field, "hccs_crc_%d", &port) == 1 && port >= 0 && port < HCCS_MAX_PCS_NUM) {
        c->hccs.crc_err_cnt[port] = (unsigned long long)v;
    } else if (strcmp(field, "hccs_bw_total_tx") == 0) {
        c->hccs_bw.total_txbw = (double)v / 100.0;
    } else if (strcmp(field, "hccs_bw_total_rx") == 0) {
        c->hccs_bw.total_rxbw = (double)v / 100.0;
    } else if (sscanf(field, "hccs_bw_tx_%d", &port) == 1 && port >= 0 && port < HCCS_MAX_PCS_NUM) {
        c->hccs_bw.tx_bandwidth[port] = (double)v / 100.0;
    } else if (sscanf(field, "hccs_bw_rx_%d", &port) == 1 && port >= 0 && port < HCCS_MAX_PCS_NUM) {
        c->hccs_bw.rx_bandwidth[port] = (double)v / 100.0;
    } else if (strcmp(field, "sio_tx") == 0) {
        c->sio.tx_error_count = (unsigned short)v;
    } else if (strcmp(field, "sio_rx") == 0) {
        c->sio.rx_error_count = (unsigned short)v;
    } else if (strcmp(field, "mem_total") == 0) {
        c->memory.memory_size = (unsigned long long)v;
    } else if (strcmp(field, "mem_avail") == 0) {
        c->memory.memory_available = (unsigned long long)v;
    } else {
        return -1;
    }
    return 0;
}

static int hccs_bw_locked(struct chip *c, struct dcmi_hccs_bandwidth_info *info)
{
    if (info == NULL || info->profiling_time <= 0) {
        return RC_BAD_PARAMETER; /* the caller sets the profiling window, in ms */
    }
    c->hccs_bw.profiling_time = info->profiling_time;
    *info = c->hccs_bw;
    return RC_OK;
}

static int memory_locked(const struct chip *c, struct dcmi_get_memory_info_stru *info)
{
    if (info == NULL) {
        return RC_BAD_PARAMETER;
    }
    *info = c->memory;
    return RC_OK;
}

/* An empty serial makes the call fail, as a card without an elabel does. */
static int elabel_locked(const struct chip *c, struct dcmi_elabel_info *info)
{
    if (info == NULL) {
        return RC_BAD_PARAMETER;
    }
    if (c->serial[0] == '\0') {
        return RC_NOT_SUPPORTED;
    }
    memset(info, 0, sizeof(*info));
    copy_str(info->serial_number, sizeof(info->serial_number), c->serial);
    return RC_OK;
}

EXPORT int dcmi_get_hccs_link_bandwidth_info(int card_id, int device_id, struct dcmi_hccs_bandwidth_info *info)
{
    CHIP_CALL(FN_HCCS_BW, card_id, device_id);
    ANSWER(hccs_bw_locked(c, info));
}

EXPORT int dcmi_get_device_memory_info_v3(int card_id, int device_id, struct dcmi_get_memory_info_stru *info)
{
    CHIP_CALL(FN_MEMORY_V3, card_id, device_id);
    ANSWER(memory_locked(c, info));
}

/* By card: the card's first chip (device 0) holds the elabel. */
EXPORT int dcmi_get_card_elabel_v2(int card_id, struct dcmi_elabel_info *info)
{
    CHIP_CALL(FN_CARD_ELABEL, card_id, 0);
    ANSWER(elabel_locked(c, info));
}

EXPORT int dcmiv2_get_device_elabel_info(int dev_id, struct dcmi_elabel_info *info)
{
    LOGIC_CALL(FN_V2_ELABEL, dev_id);
    ANSWER(elabel_locked(c, info));
}

static int uint_locked(unsigned int value, unsigned int *out)
{
    if (out == NULL) {
        return RC_BAD_PARAMETER;
    }
    *out = value;
    return RC_OK;
}

static int frequency_locked(const struct chip *c, int input_type, unsigned int *frequency)
{
    if (frequency == NULL) {
        return RC_BAD_PARAMETER;
    }
    if (input_type != DCMI_FREQ_AICORE_CURRENT) {
        return RC_NOT_SUPPORTED;
    }
    *frequency = c->aicore_freq;
    return RC_OK;
}

static int ecc_locked(const struct chip *c, int input_type, struct dcmi_ecc_info *info)
{
    if (info == NULL) {
        return RC_BAD_PARAMETER;
    }
    if (input_type != DCMI_DEVICE_TYPE_HBM) {
        return RC_NOT_SUPPORTED;
    }
    *info = c->hbm_ecc;
    return RC_OK;
}

static int pcie_locked(struct chip *c, struct dcmi_pcie_link_bandwidth_info *info)
{
    if (info == NULL || info->profiling_time <= 0) {
        return RC_BAD_PARAMETER; /* the caller sets the profiling window, in ms */
    }
    c->pcie.profiling_time = info->profiling_time;
    *info = c->pcie;
    return RC_OK;
}

static int multi_util_locked(const struct chip *c, struct dcmi_multi_utilization_info *info)
{
    if (info == NULL) {
        return RC_BAD_PARAMETER;
    }
    memset(info, 0, sizeof(*info));
    info->aic_util = c->util_cube;
    info->aiv_util = c->util_vector;
    info->aicore_util = c->util_aicore;
    info->npu_util = c->util_overall;
    return RC_OK;
}

EXPORT int dcmi_get_device_voltage(int card_id, int device_id, unsigned int *voltage)
{
    CHIP_CALL(FN_VOLTAGE, card_id, device_id);
    ANSWER(uint_locked(c->voltage, voltage));
}

EXPORT int dcmi_get_device_frequency(int card_id, int device_id, int input_type, unsigned int *frequency)
{
    CHIP_CALL(FN_FREQUENCY, card_id, device_id);
    ANSWER(frequency_locked(c, input_type, frequency));
}

EXPORT int dcmi_get_device_ecc_info(int card_id, int device_id, int input_type, struct dcmi_ecc_info *info)
{
    CHIP_CALL(FN_ECC, card_id, device_id);
    ANSWER(ecc_locked(c, input_type, info));
}

EXPORT int dcmi_get_pcie_link_bandwidth_info(int card_id, int device_id, struct dcmi_pcie_link_bandwidth_info *info)
{
    CHIP_CALL(FN_PCIE_BW, card_id, device_id);
    ANSWER(pcie_locked(c, info));
}

EXPORT int dcmi_get_device_multi_utilization_rate(int card_id, int device_id, struct dcmi_multi_utilization_info *info)
{
    CHIP_CALL(FN_MULTI_UTIL, card_id, device_id);
    ANSWER(multi_util_locked(c, info));
}

EXPORT int dcmiv2_get_device_voltage(int dev_id, unsigned int *voltage)
{
    LOGIC_CALL(FN_V2_VOLTAGE, dev_id);
    ANSWER(uint_locked(c->voltage, voltage));
}

EXPORT int dcmiv2_get_device_frequency(int dev_id, int input_type, unsigned int *frequency)
{
    LOGIC_CALL(FN_V2_FREQUENCY, dev_id);
    ANSWER(frequency_locked(c, input_type, frequency));
}

EXPORT int dcmiv2_get_device_ecc_info(int dev_id, int input_type, struct dcmi_ecc_info *info)
{
    LOGIC_CALL(FN_V2_ECC, dev_id);
    ANSWER(ecc_locked(c, input_type, info));
}

EXPORT int dcmiv2_get_pcie_link_bandwidth_info(int dev_id, struct dcmi_pcie_link_bandwidth_info *info)
{
    LOGIC_CALL(FN_V2_PCIE_BW, dev_id);
    ANSWER(pcie_locked(c, info));
}

EXPORT int dcmiv2_get_device_multi_utilization_rate(int dev_id, struct dcmi_multi_utilization_info *info)
{
    LOGIC_CALL(FN_V2_MULTI_UTIL, dev_id);
    ANSWER(multi_util_locked(c, info));
}
