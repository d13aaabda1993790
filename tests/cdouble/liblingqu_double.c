/*
 * liblingqu_double: a C stand-in for liblingqu-dcmi.so, the switch library of an Atlas A3 node.
 *
 * It exports the three calls the reference binds (component/ascend-device-plugin/pkg/device/
 * deviceswitch/library.h and the function pointers ascend_switch.go dlsyms):
 *   int lq_dcmi_init(void);
 *   int lq_dcmi_subscribe_fault_event(struct lq_dcmi_event_filter filter, LqDcmiFaultEventCallback handler);
 *   int lq_dcmi_get_fault_info(unsigned int listLen, unsigned int *eventListLen, struct LqDcmiEvent *eventList);
 * and answers them from an in-memory list of switch faults. Tests drive it in two ways, as the
 * libdcmi double:
 *
 * 1. In process, through the lq_double_* control functions below (ctypes loads the same path as
 *    the binding, so both share this library's state).
 * 2. Out of process, through a config file named by LQ_DOUBLE_CONFIG: lq_dcmi_init() resets the
 *    model and applies it; afterwards every lq_dcmi_get_fault_info re-reads it when its mtime
 *    changed (before it answers or hangs), keeping the subscription.
 *
 * Config file: one command per line, '#' starts a comment; numbers accept 0x hex.
 *   fault <type> <sub|na> <peer dev> <peer port> <switch chip> <switch port> <severity> <assertion> [alarm ms]
 *                                       one entry of the list lq_dcmi_get_fault_info answers
 *   event <delay ms> <type> <sub|na> ... (as fault)
 *                                       delivered through the callback, from a new thread, delay ms
 *                                       after the subscription (or after the reload when subscribed)
 *   rc <function|*> <rc>                make a call return rc (0 removes the override)
 *   hang <function|*> <ms|forever>      calls block (a reload or lq_double_release ends it)
 * `na` as the fault id is 0xFFFFFFFF, the library's "no fault id" (a link-down event).
 *
 * Concurrency: one mutex guards the model; a hung call waits on a condition variable with the
 * mutex released; callbacks run without the mutex, on a thread of their own like the driver's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))

#define MAX_FAULTS 256 /* more than the 128 the binding asks for: a test can overfill its list */
#define MAX_EVENTS 32
#define RC_OK 0
#define RC_BAD_PARAMETER (-8001)
#define NO_FAULT_ID 0xFFFFFFFFu

/* library.h, as the reference declares it */
typedef enum {
    HAL_REPORT_FAULT_BLOCK = 0,
    HAL_REPORT_FAULT_MAX = 20
} HalReportFaultType;

struct LqDcmiEvent {
    HalReportFaultType eventType;
    unsigned int subType;
    unsigned short peerportDevice;
    unsigned short peerportId;
    unsigned short switchChipid;
    unsigned short switchPortid;
    unsigned char severity;
    unsigned char assertion;
    char res[6];
    unsigned int eventSerialNum;
    unsigned int notifySerialNum;
    unsigned long alarmRaisedTime;
    unsigned char additionalParam[40];
    char additionalInfo[32];
};

typedef enum {
    EVENT_TYPE_ID = 1UL << 0,
    EVENT_ID = 1UL << 1,
    SEVERITY = 1UL << 2,
    CHIP_ID = 1UL << 3,
} LqDcmiEventFilterFlag;

struct lq_dcmi_event_filter {
    LqDcmiEventFilterFlag filterFlag;
    HalReportFaultType eventTypeId;
    unsigned int eventId;
    unsigned char severity;
    unsigned int chipId;
};

typedef void (*LqDcmiFaultEventCallback)(struct LqDcmiEvent *event);

enum fn { FN_INIT, FN_SUBSCRIBE, FN_GET_FAULT_INFO, FN_COUNT };
static const char *const FN_NAMES[FN_COUNT] = {"lq_dcmi_init", "lq_dcmi_subscribe_fault_event",
                                               "lq_dcmi_get_fault_info"};

struct pending {
    int delay_ms;
    struct LqDcmiEvent ev;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;

static struct LqDcmiEvent g_faults[MAX_FAULTS];
static int g_nfaults;
static int g_rc[FN_COUNT];
static int g_hang_ms[FN_COUNT]; /* 0 none, < 0 until released, > 0 every call takes that long */
static int g_counts[FN_COUNT];
static int g_hanging;
static unsigned long g_generation; /* bumped by reset, release and reload: waiting calls re-check */
static unsigned int g_serial;
static int g_count_override = -1; /* >= 0: the count lq_dcmi_get_fault_info reports, whatever it holds */

static LqDcmiFaultEventCallback g_cb;
static struct lq_dcmi_event_filter g_filter;
static struct pending g_pending[MAX_EVENTS];
static int g_npending;

static char g_config_path[4096];
static struct timespec g_config_mtime;

/* ------------------------------------------------------------------------------------------ */

static void reset_model(int keep_subscription)
{
    g_nfaults = 0;
    g_npending = 0;
    g_count_override = -1;
    memset(g_rc, 0, sizeof(g_rc));
    memset(g_hang_ms, 0, sizeof(g_hang_ms));
    memset(g_counts, 0, sizeof(g_counts));
    if (!keep_subscription) {
        g_cb = NULL;
        memset(&g_filter, 0, sizeof(g_filter));
    }
    g_generation++;
    pthread_cond_broadcast(&g_cv);
}

static int fn_index(const char *name)
{
    if (strcmp(name, "*") == 0) {
        return -1;
    }
    for (int i = 0; i < FN_COUNT; i++) {
        if (strcmp(FN_NAMES[i], name) == 0) {
            return i;
        }
    }
    return -2;
}

static void build(struct LqDcmiEvent *ev, unsigned int type, unsigned int sub, unsigned int peer_dev,
                  unsigned int peer_port, unsigned int chip, unsigned int port, unsigned int severity,
                  unsigned int assertion, unsigned long alarm_ms)
{
    memset(ev, 0, sizeof(*ev));
    ev->eventType = (HalReportFaultType)type;
    ev->subType = sub;
    ev->peerportDevice = (unsigned short)peer_dev;
    ev->peerportId = (unsigned short)peer_port;
    ev->switchChipid = (unsigned short)chip;
    ev->switchPortid = (unsigned short)port;
    ev->severity = (unsigned char)severity;
    ev->assertion = (unsigned char)assertion;
    ev->eventSerialNum = ++g_serial;
    ev->notifySerialNum = g_serial;
    ev->alarmRaisedTime = alarm_ms;
}

/* Runs on its own thread, like the driver's event thread. */
static void *deliver(void *arg)
{
    struct pending *p = arg;
    if (p->delay_ms > 0) {
        struct timespec ts = {p->delay_ms / 1000, (long)(p->delay_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    pthread_mutex_lock(&g_mu);
    LqDcmiFaultEventCallback cb = g_cb;
    pthread_mutex_unlock(&g_mu);
    if (cb != NULL) {
        cb(&p->ev); /* never with the mutex held */
    }
    free(p);
    return NULL;
}

/* Starts the scheduled events; g_mu held. */
static void start_pending(void)
{
    for (int i = 0; i < g_npending; i++) {
        struct pending *p = malloc(sizeof(*p));
        if (p == NULL) {
            continue;
        }
        *p = g_pending[i];
        pthread_t t;
        if (pthread_create(&t, NULL, deliver, p) == 0) {
            pthread_detach(t);
        } else {
            free(p);
        }
    }
    g_npending = 0;
}

static int parse_ul(const char *tok, unsigned long *out)
{
    if (tok == NULL) {
        return -1;
    }
    if (strcmp(tok, "na") == 0) {
        *out = NO_FAULT_ID;
        return 0;
    }
    char *end = NULL;
    errno = 0;
    unsigned long v = strtoul(tok, &end, 0);
    if (errno != 0 || end == tok || *end != '\0') {
        return -1;
    }
    *out = v;
    return 0;
}

/* The eight event fields and the optional alarm time from strtok_r's state; 0 or -1. */
static int parse_event(char **save, struct LqDcmiEvent *ev)
{
    unsigned long v[9] = {0};
    for (int i = 0; i < 8; i++) {
        if (parse_ul(strtok_r(NULL, " \t\r\n", save), &v[i]) != 0) {
            return -1;
        }
    }
    char *alarm = strtok_r(NULL, " \t\r\n", save);
    if (alarm != NULL && parse_ul(alarm, &v[8]) != 0) {
        return -1;
    }
    build(ev, (unsigned int)v[0], (unsigned int)v[1], (unsigned int)v[2], (unsigned int)v[3], (unsigned int)v[4],
          (unsigned int)v[5], (unsigned int)v[6], (unsigned int)v[7], v[8]);
    return 0;
}

static void set_for(int fn, int *table, int value)
{
    for (int i = 0; i < FN_COUNT; i++) {
        if (fn == -1 || fn == i) {
            table[i] = value;
        }
    }
}

/* One config line; g_mu held. 0, or -1 when the line is invalid. */
static int apply_line(char *line)
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
    if (strcmp(cmd, "fault") == 0) {
        if (g_nfaults == MAX_FAULTS) {
            return -1;
        }
        return parse_event(&save, &g_faults[g_nfaults++]) == 0 ? 0 : (g_nfaults--, -1);
    }
    if (strcmp(cmd, "event") == 0) {
        unsigned long delay;
        if (g_npending == MAX_EVENTS || parse_ul(strtok_r(NULL, " \t\r\n", &save), &delay) != 0) {
            return -1;
        }
        g_pending[g_npending].delay_ms = (int)delay;
        return parse_event(&save, &g_pending[g_npending].ev) == 0 ? (g_npending++, 0) : -1;
    }
    if (strcmp(cmd, "rc") == 0 || strcmp(cmd, "hang") == 0) {
        char *name = strtok_r(NULL, " \t\r\n", &save);
        char *value = strtok_r(NULL, " \t\r\n", &save);
        int fn = name == NULL ? -2 : fn_index(name);
        if (fn == -2 || value == NULL) {
            return -1;
        }
        long v;
        if (cmd[0] == 'h' && strcmp(value, "forever") == 0) {
            v = -1;
        } else {
            char *end = NULL;
            v = strtol(value, &end, 0);
            if (*end != '\0') {
                return -1;
            }
        }
        set_for(fn, cmd[0] == 'r' ? g_rc : g_hang_ms, (int)v);
        return 0;
    }
    return -1;
}

/* Resets the model (keeping the subscription) and applies the file; g_mu held.
 * 0, -1 when the file cannot be read, or the number of the first bad line. */
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
    int lineno = 0, bad = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        lineno++;
        if (apply_line(line) != 0 && bad == 0) {
            bad = lineno;
            fprintf(stderr, "liblingqu_double: %s:%d: invalid line\n", path, lineno);
        }
    }
    fclose(f);
    if (g_cb != NULL) {
        start_pending();
    }
    return bad;
}

/* g_mu held. */
static void maybe_reload_config(void)
{
    struct stat st;
    if (g_config_path[0] != '\0' && stat(g_config_path, &st) == 0 &&
        (st.st_mtim.tv_sec != g_config_mtime.tv_sec || st.st_mtim.tv_nsec != g_config_mtime.tv_nsec)) {
        load_config_locked(g_config_path);
    }
}

/* Counts the call, blocks while its function hangs and returns its rc override; g_mu held. */
static int enter(enum fn fn)
{
    g_counts[fn]++;
    if (g_hang_ms[fn] != 0) {
        unsigned long generation = g_generation;
        g_hanging++;
        if (g_hang_ms[fn] < 0) {
            while (g_hang_ms[fn] < 0 && g_generation == generation) {
                pthread_cond_wait(&g_cv, &g_mu);
            }
        } else {
            struct timespec deadline;
            clock_gettime(CLOCK_REALTIME, &deadline);
            deadline.tv_sec += g_hang_ms[fn] / 1000;
            deadline.tv_nsec += (long)(g_hang_ms[fn] % 1000) * 1000000L;
            if (deadline.tv_nsec >= 1000000000L) {
                deadline.tv_sec += 1;
                deadline.tv_nsec -= 1000000000L;
            }
            while (g_generation == generation) {
                if (pthread_cond_timedwait(&g_cv, &g_mu, &deadline) == ETIMEDOUT) {
                    break;
                }
            }
        }
        g_hanging--;
    }
    return g_rc[fn];
}

/* ------------------------------------------------------------------------------------------ */
/* the library                                                                                  */

EXPORT int lq_dcmi_init(void)
{
    pthread_mutex_lock(&g_mu);
    int rc = enter(FN_INIT);
    const char *path = getenv("LQ_DOUBLE_CONFIG");
    if (rc == RC_OK && path != NULL && path[0] != '\0') {
        snprintf(g_config_path, sizeof(g_config_path), "%s", path);
        rc = load_config_locked(g_config_path) == 0 ? g_rc[FN_INIT] : RC_BAD_PARAMETER;
    }
    pthread_mutex_unlock(&g_mu);
    return rc;
}

EXPORT int lq_dcmi_subscribe_fault_event(struct lq_dcmi_event_filter filter, LqDcmiFaultEventCallback handler)
{
    pthread_mutex_lock(&g_mu);
    int rc = enter(FN_SUBSCRIBE);
    if (rc == RC_OK) {
        if (handler == NULL) {
            rc = RC_BAD_PARAMETER;
        } else {
            g_cb = handler;
            g_filter = filter;
            start_pending();
        }
    }
    pthread_mutex_unlock(&g_mu);
    return rc;
}

EXPORT int lq_dcmi_get_fault_info(unsigned int listLen, unsigned int *eventListLen, struct LqDcmiEvent *eventList)
{
    pthread_mutex_lock(&g_mu);
    maybe_reload_config();
    int rc = enter(FN_GET_FAULT_INFO);
    if (rc == RC_OK) {
        if (eventListLen == NULL || eventList == NULL) {
            rc = RC_BAD_PARAMETER;
        } else {
            unsigned int n = (unsigned int)g_nfaults < listLen ? (unsigned int)g_nfaults : listLen;
            memcpy(eventList, g_faults, n * sizeof(*eventList));
            *eventListLen = g_count_override >= 0 ? (unsigned int)g_count_override : n;
        }
    }
    pthread_mutex_unlock(&g_mu);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Control API (tests only)                                                                     */

/* No faults, overrides, hangs (blocked calls return), subscription or config file; zero counts. */
EXPORT void lq_double_reset(void)
{
    pthread_mutex_lock(&g_mu);
    g_config_path[0] = '\0';
    reset_model(0);
    pthread_mutex_unlock(&g_mu);
}

/* Appends a fault to the list lq_dcmi_get_fault_info answers; 0, or -1 when the list is full. */
EXPORT int lq_double_add_fault(unsigned int type, unsigned int sub, unsigned int peer_dev, unsigned int peer_port,
                               unsigned int chip, unsigned int port, unsigned int severity, unsigned int assertion,
                               unsigned long alarm_ms)
{
    pthread_mutex_lock(&g_mu);
    int rc = -1;
    if (g_nfaults < MAX_FAULTS) {
        build(&g_faults[g_nfaults++], type, sub, peer_dev, peer_port, chip, port, severity, assertion, alarm_ms);
        rc = 0;
    }
    pthread_mutex_unlock(&g_mu);
    return rc;
}

EXPORT void lq_double_clear_faults(void)
{
    pthread_mutex_lock(&g_mu);
    g_nfaults = 0;
    pthread_mutex_unlock(&g_mu);
}

/* The count lq_dcmi_get_fault_info reports from now on (-1: the real one), to model a bad driver. */
EXPORT void lq_double_set_count(int count)
{
    pthread_mutex_lock(&g_mu);
    g_count_override = count;
    pthread_mutex_unlock(&g_mu);
}

/* Delivers one event through the subscribed callback from a new thread and waits for it;
 * 0 delivered, -1 nobody subscribed. */
EXPORT int lq_double_fire(unsigned int type, unsigned int sub, unsigned int peer_dev, unsigned int peer_port,
                          unsigned int chip, unsigned int port, unsigned int severity, unsigned int assertion,
                          unsigned long alarm_ms)
{
    struct pending *p = malloc(sizeof(*p));
    if (p == NULL) {
        return -2;
    }
    pthread_mutex_lock(&g_mu);
    int subscribed = g_cb != NULL;
    p->delay_ms = 0;
    build(&p->ev, type, sub, peer_dev, peer_port, chip, port, severity, assertion, alarm_ms);
    pthread_mutex_unlock(&g_mu);
    if (!subscribed) {
        free(p);
        return -1;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, deliver, p) != 0) {
        free(p);
        return -2;
    }
    pthread_join(t, NULL);
    return 0;
}

/* rc for `function` ("*": every one); 0 removes the override. 0, or -1 for an unknown name. */
EXPORT int lq_double_set_rc(const char *function, int rc)
{
    int fn = fn_index(function);
    if (fn == -2) {
        return -1;
    }
    pthread_mutex_lock(&g_mu);
    set_for(fn, g_rc, rc);
    pthread_mutex_unlock(&g_mu);
    return 0;
}

/* Calls of `function` ("*": every one) block for ms (-1: until lq_double_release). */
EXPORT int lq_double_hang(const char *function, int ms)
{
    int fn = fn_index(function);
    if (fn == -2) {
        return -1;
    }
    pthread_mutex_lock(&g_mu);
    set_for(fn, g_hang_ms, ms);
    pthread_mutex_unlock(&g_mu);
    return 0;
}

/* Ends every hang; blocked calls return. */
EXPORT void lq_double_release(void)
{
    pthread_mutex_lock(&g_mu);
    memset(g_hang_ms, 0, sizeof(g_hang_ms));
    g_generation++;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
}

EXPORT int lq_double_hanging(void)
{
    pthread_mutex_lock(&g_mu);
    int n = g_hanging;
    pthread_mutex_unlock(&g_mu);
    return n;
}

/* Calls of `function` since the last reset; -1 for an unknown name. */
EXPORT int lq_double_call_count(const char *function)
{
    int fn = fn_index(function);
    if (fn < 0) {
        return -1;
    }
    pthread_mutex_lock(&g_mu);
    int n = g_counts[fn];
    pthread_mutex_unlock(&g_mu);
    return n;
}

/* Whether a callback is registered; *filter gets the filter it came with. */
EXPORT int lq_double_subscription(struct lq_dcmi_event_filter *filter)
{
    pthread_mutex_lock(&g_mu);
    int subscribed = g_cb != NULL;
    if (filter != NULL) {
        *filter = g_filter;
    }
    pthread_mutex_unlock(&g_mu);
    return subscribed;
}

/* sizeof and offsetof of the two structs, for the binding's layout test. */
EXPORT int lq_double_layout(const char *what)
{
#define LQ_FIELD(s, f)                  \
    if (strcmp(what, #s "." #f) == 0) { \
        return (int)offsetof(struct s, f); \
    }
    if (strcmp(what, "LqDcmiEvent") == 0) {
        return (int)sizeof(struct LqDcmiEvent);
    }
    if (strcmp(what, "lq_dcmi_event_filter") == 0) {
        return (int)sizeof(struct lq_dcmi_event_filter);
    }
    LQ_FIELD(LqDcmiEvent, subType)
    LQ_FIELD(LqDcmiEvent, peerportDevice)
    LQ_FIELD(LqDcmiEvent, switchPortid)
    LQ_FIELD(LqDcmiEvent, severity)
    LQ_FIELD(LqDcmiEvent, assertion)
    LQ_FIELD(LqDcmiEvent, eventSerialNum)
    LQ_FIELD(LqDcmiEvent, alarmRaisedTime)
    LQ_FIELD(LqDcmiEvent, additionalParam)
    LQ_FIELD(LqDcmiEvent, additionalInfo)
    LQ_FIELD(lq_dcmi_event_filter, severity)
    LQ_FIELD(lq_dcmi_event_filter, chipId)
#undef LQ_FIELD
    return -1;
}
