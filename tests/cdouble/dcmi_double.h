/*
 * The DCMI shapes the Python binding uses (contract section 10), written for the C test double
 * and for layout.c, which prints their sizes and field offsets so that a test can compare them
 * with the ctypes declarations of dcmi_exporter.backends.dcmi.structs.
 *
 * Written from the call shapes of the contract and checked against the reference header
 * (Ascend/mind-cluster component/ascend-common/devmanager/dcmi/dcmi_interface_api.h). The
 * anonymous unions of the reference carry a tag here (dcmi_ip_u_addr, dcmi_event_u) only so that
 * layout.c can name them; a tag does not change the layout.
 */
#ifndef DCMI_DOUBLE_H
#define DCMI_DOUBLE_H

#define DCMI_CHIP_NAME_LEN 32
#define DCMI_TEMPLATE_NAME_LEN 32
#define DCMI_VDEV_RESERVED_LEN 32
#define DCMI_EVENT_NAME_LEN 256
#define DCMI_EVENT_DATA_LEN 32
#define DCMI_EVENT_RESV_LEN 32
#define DCMI_MAX_ERROR_CODES 128
#define DCMI_MAX_PROCS 32
#define DCMI_SPOD_RESERVE_LEN 6
#define DCMI_DIE_ID_COUNT 5

/* dcmi_get_device_info main command and sub command of the super-pod information */
#define DCMI_MAIN_CMD_CHIP_INF 12
#define DCMI_CHIP_INF_SUB_CMD_SPOD_INFO 1

/* dcmi_get_device_chip_info (v1, the fallback of older drivers) */
struct dcmi_chip_info {
    unsigned char chip_type[DCMI_CHIP_NAME_LEN];
    unsigned char chip_name[DCMI_CHIP_NAME_LEN];
    unsigned char chip_ver[DCMI_CHIP_NAME_LEN];
    unsigned int aicore_cnt;
};

/* dcmi_get_device_chip_info_v2 */
struct dcmi_chip_info_v2 {
    unsigned char chip_type[DCMI_CHIP_NAME_LEN];
    unsigned char chip_name[DCMI_CHIP_NAME_LEN];
    unsigned char chip_ver[DCMI_CHIP_NAME_LEN];
    unsigned int aicore_cnt;
    unsigned char npu_name[DCMI_CHIP_NAME_LEN];
};

/* dcmi_get_device_hbm_info: sizes in MB */
struct dcmi_hbm_info {
    unsigned long long memory_size;
    unsigned int freq;
    unsigned long long memory_usage;
    int temp;
    unsigned int bandwith_util_rate; /* sic: the reference spells it this way */
};

/* dcmi_get_device_ip: ip_type is an enum (0 v4, 1 v6) */
union dcmi_ip_u_addr {
    unsigned char ip6[16];
    unsigned char ip4[4];
};

struct dcmi_ip_addr {
    union dcmi_ip_u_addr u_addr;
    int ip_type;
};

/* dcmi_get_device_resource_info: one running process */
struct dcmi_proc_mem_info {
    int proc_id;
    unsigned long proc_mem_usage; /* bytes */
};

/* dcmi_get_device_board_info */
struct dcmi_board_info {
    unsigned int board_id;
    unsigned int pcb_id;
    unsigned int bom_id;
    unsigned int slot_id;
};

/* dcmi_get_device_info / dcmiv2_get_device_info(DCMI_MAIN_CMD_CHIP_INF, SPOD_INFO): the super pod (A3, 950) */
struct dcmi_spod_info {
    unsigned int sdid;
    unsigned int scale_type;
    unsigned int super_pod_id;
    unsigned int server_id;
    unsigned int chassis_id;     /* A5 */
    unsigned int super_pod_type; /* A5 */
    unsigned int reserve[DCMI_SPOD_RESERVE_LEN];
};

/* dcmi_get_device_die_v2 / dcmiv2_get_device_die_id: one die's id */
struct dcmi_die_id {
    unsigned int soc_die[DCMI_DIE_ID_COUNT];
};

/* dcmi_get_eid_list_by_urma_dev_index / dcmiv2_...: a 950 chip's URMA EIDs (the reference's header,
 * "urma device API for A5"). The union is aligned 8 by its unsigned long views; the info struct is 24
 * bytes with its tail padding. The views carry tags here (dcmi_urma_eid_in4/in6) so layout.c can name them. */
#define DCMI_URMA_EID_MAX_COUNT 32
#define DCMI_URMA_EID_SIZE 16

struct dcmi_urma_eid_in4 {
    unsigned long reserved; /* if IPv4 mapped to IPv6, == 0 */
    unsigned int prefix;    /* if IPv4 mapped to IPv6, == 0x0000ffff */
    unsigned int addr;      /* if IPv4 mapped to IPv6, == IPv4 addr */
};

struct dcmi_urma_eid_in6 {
    unsigned long subnet_prefix;
    unsigned long interface_id;
};

typedef union dcmi_urma_eid {
    unsigned char raw[DCMI_URMA_EID_SIZE];
    struct dcmi_urma_eid_in4 in4;
    struct dcmi_urma_eid_in6 in6;
} dcmi_urma_eid_t;

typedef struct dcmi_urma_eid_info {
    dcmi_urma_eid_t eid;
    unsigned int eid_index;
} dcmi_urma_eid_info_t;

/* enum dcmi_die_type; DDIE is the v2 library's (the 950) */
#define DCMI_NDIE 0
#define DCMI_VDIE 1
#define DCMI_DDIE 2

/* dcmi_create_vdevice input; 0xFFFFFFFF ids let the library choose */
struct dcmi_create_vdev_res_stru {
    unsigned int vdev_id;
    unsigned int vfg_id;
    char template_name[DCMI_TEMPLATE_NAME_LEN];
    unsigned char reserved[64];
};

/* dcmi_create_vdevice output */
struct dcmi_create_vdev_out {
    unsigned int vdev_id;
    unsigned int pcie_bus;
    unsigned int pcie_device;
    unsigned int pcie_func;
    unsigned int vfg_id;
    unsigned char reserved[DCMI_VDEV_RESERVED_LEN];
};

/* dcmi_subscribe_fault_event filter, passed BY VALUE */
struct dcmi_event_filter {
    unsigned long long filter_flag;
    unsigned int event_id;
    unsigned char severity;
    unsigned char node_type;
    unsigned char resv[DCMI_EVENT_RESV_LEN];
};

struct dcmi_dms_fault_event {
    unsigned int event_id;
    unsigned short deviceid; /* the logic id */
    unsigned char node_type;
    unsigned char node_id;
    unsigned char sub_node_type;
    unsigned char sub_node_id;
    unsigned char severity;  /* 0 warning .. 3 critical */
    unsigned char assertion; /* 0 recover, 1 occur, 2 once */
    int event_serial_num;
    int notify_serial_num;
    unsigned long long alarm_raised_time;
    char event_name[DCMI_EVENT_NAME_LEN];
    char additional_info[DCMI_EVENT_DATA_LEN];
    unsigned char resv[DCMI_EVENT_RESV_LEN];
};

union dcmi_event_u {
    struct dcmi_dms_fault_event dms_event;
};

struct dcmi_event {
    int type; /* enum dcmi_event_type: 0 = fault event */
    union dcmi_event_u event_t;
};

typedef void (*dcmi_fault_event_callback)(struct dcmi_event *event);

/* Metrics (npu-exporter parity). dcmi_get_device_ecc_info (enum dcmi_device_type: 2 HBM) */
#define DCMI_DEVICE_TYPE_HBM 2
#define DCMI_FREQ_AICORE_CURRENT 7
#define AGENTDRV_PROF_DATA_NUM 3
#define DCMI_UTIL_RESERVED_LEN 8

struct dcmi_ecc_info {
    int enable_flag;
    unsigned int single_bit_error_cnt;
    unsigned int double_bit_error_cnt;
    unsigned int total_single_bit_error_cnt;
    unsigned int total_double_bit_error_cnt;
    unsigned int single_bit_isolated_pages_cnt;
    unsigned int double_bit_isolated_pages_cnt;
    unsigned int single_bit_next_isolated_pages_cnt;
    unsigned int double_bit_next_isolated_pages_cnt;
};

/* dcmi_get_pcie_link_bandwidth_info: each array is (min, max, avg) */
struct dcmi_pcie_link_bandwidth_info {
    int profiling_time;
    unsigned int tx_p_bw[AGENTDRV_PROF_DATA_NUM];
    unsigned int tx_np_bw[AGENTDRV_PROF_DATA_NUM];
    unsigned int tx_cpl_bw[AGENTDRV_PROF_DATA_NUM];
    unsigned int tx_np_lantency[AGENTDRV_PROF_DATA_NUM];
    unsigned int rx_p_bw[AGENTDRV_PROF_DATA_NUM];
    unsigned int rx_np_bw[AGENTDRV_PROF_DATA_NUM];
    unsigned int rx_cpl_bw[AGENTDRV_PROF_DATA_NUM];
};

/* dcmi_get_device_multi_utilization_rate */
struct dcmi_multi_utilization_info {
    unsigned int aic_util;
    unsigned int aiv_util;
    unsigned int aicore_util;
    unsigned int npu_util;
    unsigned int reserved[DCMI_UTIL_RESERVED_LEN];
};

#define HCCS_MAX_PCS_NUM 16
#define HCCS_RES_PCS_NUM 64
#define DCMI_ELABEL_LEN 256 /* MAX_LENGTH */
#define DCMI_MAIN_CMD_HCCS 16
#define DCMI_MAIN_CMD_SIO 56
#define DCMI_HCCS_SUB_CMD_STATISTIC 3
#define DCMI_HCCS_SUB_CMD_STATISTIC_U64 5
#define DCMI_SIO_SUB_CMD_CRC_ERR 0

/* dcmi_get_device_info(DCMI_MAIN_CMD_HCCS, 3) */
struct dcmi_hccs_statistic_info {
    unsigned int tx_cnt[HCCS_MAX_PCS_NUM];
    unsigned int rx_cnt[HCCS_MAX_PCS_NUM];
    unsigned int crc_err_cnt[HCCS_MAX_PCS_NUM];
    unsigned int retry_cnt[HCCS_MAX_PCS_NUM];
    unsigned int reserved_field_cnt[HCCS_RES_PCS_NUM];
};

/* dcmi_get_device_info(DCMI_MAIN_CMD_HCCS, 5) */
struct dcmi_hccs_statistic_info_u64 {
    unsigned long long tx_cnt[HCCS_MAX_PCS_NUM];
    unsigned long long rx_cnt[HCCS_MAX_PCS_NUM];
    unsigned long long crc_err_cnt[HCCS_MAX_PCS_NUM];
    unsigned long long retry_cnt[HCCS_MAX_PCS_NUM];
    unsigned long long reserved[HCCS_RES_PCS_NUM];
};

/* dcmi_get_hccs_link_bandwidth_info */
struct dcmi_hccs_bandwidth_info {
    int profiling_time;
    double total_txbw;
    double total_rxbw;
    double tx_bandwidth[HCCS_MAX_PCS_NUM];
    double rx_bandwidth[HCCS_MAX_PCS_NUM];
};

/* dcmi_get_device_info(DCMI_MAIN_CMD_SIO, 0) */
struct dcmi_sio_crc_err_statistic_info {
    unsigned short tx_error_count;
    unsigned short rx_error_count;
    unsigned char reserved[8];
};

/* dcmi_get_device_memory_info_v3 */
struct dcmi_get_memory_info_stru {
    unsigned long long memory_size;
    unsigned long long memory_available;
    unsigned int freq;
    unsigned long hugepagesize;
    unsigned long hugepages_total;
    unsigned long hugepages_free;
    unsigned int utiliza;
    unsigned char reserve[60];
};

/* dcmi_get_card_elabel_v2 / dcmiv2_get_device_elabel_info */
struct dcmi_elabel_info {
    char product_name[DCMI_ELABEL_LEN];
    char model[DCMI_ELABEL_LEN];
    char manufacturer[DCMI_ELABEL_LEN];
    char manufacturer_date[DCMI_ELABEL_LEN];
    char serial_number[DCMI_ELABEL_LEN];
};

/* dcmi_get_device_info(DCMI_MAIN_CMD_VDEV_MNG, ...): a 310P vNPU's resources (sub-command 0) and its
 * activity (sub-command 5), both in struct dcmi_vdev_query_stru with vdev_id set by the caller */
#define DCMI_MAIN_CMD_VDEV_MNG 52
#define DCMI_VMNG_SUB_CMD_GET_VDEV_RESOURCE 0
#define DCMI_VMNG_SUB_CMD_GET_VDEV_ACTIVITY 5
#define DCMI_VDEV_RES_NAME_LEN 16
#define DCMI_VDEV_SIZE 20 /* the vnpu fields' bytes, taken from the computing resource's reserve */

struct dcmi_base_resource {
    unsigned long long token;
    unsigned long long token_max;
    unsigned long long task_timeout;
    unsigned int vfg_id;
    unsigned char vip_mode;
    unsigned char reserved[DCMI_VDEV_RESERVED_LEN - 1];
};

struct dcmi_computing_resource {
    float aic;
    float aiv;
    unsigned short dsa;
    unsigned short rtsq;
    unsigned short acsq;
    unsigned short cdqm;
    unsigned short c_core;
    unsigned short ffts;
    unsigned short sdma;
    unsigned short pcie_dma;
    unsigned long long memory_size; /* MB */
    unsigned int event_id;
    unsigned int notify_id;
    unsigned int stream_id;
    unsigned int model_id;
    unsigned short topic_schedule_aicpu;
    unsigned short host_ctrl_cpu;
    unsigned short host_aicpu;
    unsigned short device_aicpu;
    unsigned short topic_ctrl_cpu_slot;
    unsigned int vdev_aicore_utilization; /* the activity query's */
    unsigned long long vdev_memory_total;
    unsigned long long vdev_memory_free;
    unsigned char reserved[DCMI_VDEV_RESERVED_LEN - DCMI_VDEV_SIZE];
};

struct dcmi_media_resource {
    float jpegd;
    float jpege;
    float vpc;
    float vdec;
    float pngd;
    float venc;
    unsigned char reserved[DCMI_VDEV_RESERVED_LEN];
};

struct dcmi_vdev_query_info {
    char name[DCMI_VDEV_RES_NAME_LEN];
    unsigned int status;
    unsigned int is_container_used;
    unsigned int vfid;
    unsigned int vfg_id;
    unsigned long long container_id;
    struct dcmi_base_resource base;
    struct dcmi_computing_resource computing;
    struct dcmi_media_resource media;
};

struct dcmi_vdev_query_stru {
    unsigned int vdev_id;
    struct dcmi_vdev_query_info query_info;
};

#endif /* DCMI_DOUBLE_H */
