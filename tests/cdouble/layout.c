/*
 * Prints the layout of every DCMI struct the Python binding declares, one fact a line:
 *   <struct> <sizeof>
 *   <struct>.<field> <offsetof>
 * test_dcmi_layout.py compiles this with the same header as the double and compares each line with
 * ctypes.sizeof / Structure.field.offset, so a wrong declaration fails there instead of corrupting
 * memory on a node.
 */
#include <stddef.h>
#include <stdio.h>

#include "dcmi_double.h"

#define SIZE(tag, name) printf("%s %zu\n", #name, sizeof(tag name))
#define FIELD(tag, name, field) printf("%s.%s %zu\n", #name, #field, offsetof(tag name, field))

int main(void)
{
    SIZE(struct, dcmi_chip_info);
    FIELD(struct, dcmi_chip_info, chip_type);
    FIELD(struct, dcmi_chip_info, chip_name);
    FIELD(struct, dcmi_chip_info, chip_ver);
    FIELD(struct, dcmi_chip_info, aicore_cnt);

    SIZE(struct, dcmi_chip_info_v2);
    FIELD(struct, dcmi_chip_info_v2, chip_type);
    FIELD(struct, dcmi_chip_info_v2, chip_name);
    FIELD(struct, dcmi_chip_info_v2, chip_ver);
    FIELD(struct, dcmi_chip_info_v2, aicore_cnt);
    FIELD(struct, dcmi_chip_info_v2, npu_name);

    SIZE(struct, dcmi_hbm_info);
    FIELD(struct, dcmi_hbm_info, memory_size);
    FIELD(struct, dcmi_hbm_info, freq);
    FIELD(struct, dcmi_hbm_info, memory_usage);
    FIELD(struct, dcmi_hbm_info, temp);
    FIELD(struct, dcmi_hbm_info, bandwith_util_rate);

    SIZE(union, dcmi_ip_u_addr);
    FIELD(union, dcmi_ip_u_addr, ip6);
    FIELD(union, dcmi_ip_u_addr, ip4);

    SIZE(struct, dcmi_ip_addr);
    FIELD(struct, dcmi_ip_addr, u_addr);
    FIELD(struct, dcmi_ip_addr, ip_type);

    SIZE(struct, dcmi_proc_mem_info);
    FIELD(struct, dcmi_proc_mem_info, proc_id);
    FIELD(struct, dcmi_proc_mem_info, proc_mem_usage);

    SIZE(struct, dcmi_board_info);
    FIELD(struct, dcmi_board_info, board_id);
    FIELD(struct, dcmi_board_info, pcb_id);
    FIELD(struct, dcmi_board_info, bom_id);
    FIELD(struct, dcmi_board_info, slot_id);

    SIZE(struct, dcmi_spod_info);
    FIELD(struct, dcmi_spod_info, sdid);
    FIELD(struct, dcmi_spod_info, scale_type);
    FIELD(struct, dcmi_spod_info, super_pod_id);
    FIELD(struct, dcmi_spod_info, server_id);
    FIELD(struct, dcmi_spod_info, chassis_id);
    FIELD(struct, dcmi_spod_info, super_pod_type);
    FIELD(struct, dcmi_spod_info, reserve);
    SIZE(struct, dcmi_die_id);
    FIELD(struct, dcmi_die_id, soc_die);

    SIZE(struct, dcmi_urma_eid_in4);
    FIELD(struct, dcmi_urma_eid_in4, reserved);
    FIELD(struct, dcmi_urma_eid_in4, prefix);
    FIELD(struct, dcmi_urma_eid_in4, addr);
    SIZE(struct, dcmi_urma_eid_in6);
    FIELD(struct, dcmi_urma_eid_in6, subnet_prefix);
    FIELD(struct, dcmi_urma_eid_in6, interface_id);
    SIZE(union, dcmi_urma_eid);
    FIELD(union, dcmi_urma_eid, raw);
    FIELD(union, dcmi_urma_eid, in4);
    FIELD(union, dcmi_urma_eid, in6);
    SIZE(struct, dcmi_urma_eid_info);
    FIELD(struct, dcmi_urma_eid_info, eid);
    FIELD(struct, dcmi_urma_eid_info, eid_index);

    SIZE(struct, dcmi_create_vdev_res_stru);
    FIELD(struct, dcmi_create_vdev_res_stru, vdev_id);
    FIELD(struct, dcmi_create_vdev_res_stru, vfg_id);
    FIELD(struct, dcmi_create_vdev_res_stru, template_name);
    FIELD(struct, dcmi_create_vdev_res_stru, reserved);

    SIZE(struct, dcmi_create_vdev_out);
    FIELD(struct, dcmi_create_vdev_out, vdev_id);
    FIELD(struct, dcmi_create_vdev_out, pcie_bus);
    FIELD(struct, dcmi_create_vdev_out, pcie_device);
    FIELD(struct, dcmi_create_vdev_out, pcie_func);
    FIELD(struct, dcmi_create_vdev_out, vfg_id);
    FIELD(struct, dcmi_create_vdev_out, reserved);

    SIZE(struct, dcmi_event_filter);
    FIELD(struct, dcmi_event_filter, filter_flag);
    FIELD(struct, dcmi_event_filter, event_id);
    FIELD(struct, dcmi_event_filter, severity);
    FIELD(struct, dcmi_event_filter, node_type);
    FIELD(struct, dcmi_event_filter, resv);

    SIZE(struct, dcmi_dms_fault_event);
    FIELD(struct, dcmi_dms_fault_event, event_id);
    FIELD(struct, dcmi_dms_fault_event, deviceid);
    FIELD(struct, dcmi_dms_fault_event, node_type);
    FIELD(struct, dcmi_dms_fault_event, node_id);
    FIELD(struct, dcmi_dms_fault_event, sub_node_type);
    FIELD(struct, dcmi_dms_fault_event, sub_node_id);
    FIELD(struct, dcmi_dms_fault_event, severity);
    FIELD(struct, dcmi_dms_fault_event, assertion);
    FIELD(struct, dcmi_dms_fault_event, event_serial_num);
    FIELD(struct, dcmi_dms_fault_event, notify_serial_num);
    FIELD(struct, dcmi_dms_fault_event, alarm_raised_time);
    FIELD(struct, dcmi_dms_fault_event, event_name);
    FIELD(struct, dcmi_dms_fault_event, additional_info);
    FIELD(struct, dcmi_dms_fault_event, resv);

    SIZE(union, dcmi_event_u);
    FIELD(union, dcmi_event_u, dms_event);

    SIZE(struct, dcmi_event);
    FIELD(struct, dcmi_event, type);
    FIELD(struct, dcmi_event, event_t);

    SIZE(struct, dcmi_ecc_info);
    FIELD(struct, dcmi_ecc_info, enable_flag);
    FIELD(struct, dcmi_ecc_info, single_bit_error_cnt);
    FIELD(struct, dcmi_ecc_info, double_bit_error_cnt);
    FIELD(struct, dcmi_ecc_info, total_single_bit_error_cnt);
    FIELD(struct, dcmi_ecc_info, total_double_bit_error_cnt);
    FIELD(struct, dcmi_ecc_info, single_bit_isolated_pages_cnt);
    FIELD(struct, dcmi_ecc_info, double_bit_isolated_pages_cnt);
    FIELD(struct, dcmi_ecc_info, single_bit_next_isolated_pages_cnt);
    FIELD(struct, dcmi_ecc_info, double_bit_next_isolated_pages_cnt);

    SIZE(struct, dcmi_pcie_link_bandwidth_info);
    FIELD(struct, dcmi_pcie_link_bandwidth_info, profiling_time);
    FIELD(struct, dcmi_pcie_link_bandwidth_info, tx_p_bw);
    FIELD(struct, dcmi_pcie_link_bandwidth_info, tx_np_bw);
    FIELD(struct, dcmi_pcie_link_bandwidth_info, tx_cpl_bw);
    FIELD(struct, dcmi_pcie_link_bandwidth_info, tx_np_lantency);
    FIELD(struct, dcmi_pcie_link_bandwidth_info, rx_p_bw);
    FIELD(struct, dcmi_pcie_link_bandwidth_info, rx_np_bw);
    FIELD(struct, dcmi_pcie_link_bandwidth_info, rx_cpl_bw);

    SIZE(struct, dcmi_multi_utilization_info);
    FIELD(struct, dcmi_multi_utilization_info, aic_util);
    FIELD(struct, dcmi_multi_utilization_info, aiv_util);
    FIELD(struct, dcmi_multi_utilization_info, aicore_util);
    FIELD(struct, dcmi_multi_utilization_info, npu_util);
    FIELD(struct, dcmi_multi_utilization_info, reserved);

    SIZE(struct, dcmi_hccs_statistic_info);
    FIELD(struct, dcmi_hccs_statistic_info, tx_cnt);
    FIELD(struct, dcmi_hccs_statistic_info, rx_cnt);
    FIELD(struct, dcmi_hccs_statistic_info, crc_err_cnt);
    FIELD(struct, dcmi_hccs_statistic_info, retry_cnt);
    FIELD(struct, dcmi_hccs_statistic_info, reserved_field_cnt);

    SIZE(struct, dcmi_hccs_statistic_info_u64);
    FIELD(struct, dcmi_hccs_statistic_info_u64, tx_cnt);
    FIELD(struct, dcmi_hccs_statistic_info_u64, rx_cnt);
    FIELD(struct, dcmi_hccs_statistic_info_u64, crc_err_cnt);
    FIELD(struct, dcmi_hccs_statistic_info_u64, retry_cnt);
    FIELD(struct, dcmi_hccs_statistic_info_u64, reserved);

    SIZE(struct, dcmi_hccs_bandwidth_info);
    FIELD(struct, dcmi_hccs_bandwidth_info, profiling_time);
    FIELD(struct, dcmi_hccs_bandwidth_info, total_txbw);
    FIELD(struct, dcmi_hccs_bandwidth_info, total_rxbw);
    FIELD(struct, dcmi_hccs_bandwidth_info, tx_bandwidth);
    FIELD(struct, dcmi_hccs_bandwidth_info, rx_bandwidth);

    SIZE(struct, dcmi_sio_crc_err_statistic_info);
    FIELD(struct, dcmi_sio_crc_err_statistic_info, tx_error_count);
    FIELD(struct, dcmi_sio_crc_err_statistic_info, rx_error_count);
    FIELD(struct, dcmi_sio_crc_err_statistic_info, reserved);

    SIZE(struct, dcmi_get_memory_info_stru);
    FIELD(struct, dcmi_get_memory_info_stru, memory_size);
    FIELD(struct, dcmi_get_memory_info_stru, memory_available);
    FIELD(struct, dcmi_get_memory_info_stru, freq);
    FIELD(struct, dcmi_get_memory_info_stru, hugepagesize);
    FIELD(struct, dcmi_get_memory_info_stru, hugepages_total);
    FIELD(struct, dcmi_get_memory_info_stru, hugepages_free);
    FIELD(struct, dcmi_get_memory_info_stru, utiliza);
    FIELD(struct, dcmi_get_memory_info_stru, reserve);

    SIZE(struct, dcmi_elabel_info);
    FIELD(struct, dcmi_elabel_info, product_name);
    FIELD(struct, dcmi_elabel_info, model);
    FIELD(struct, dcmi_elabel_info, manufacturer);
    FIELD(struct, dcmi_elabel_info, manufacturer_date);
    FIELD(struct, dcmi_elabel_info, serial_number);

    SIZE(struct, dcmi_base_resource);
    FIELD(struct, dcmi_base_resource, token);
    FIELD(struct, dcmi_base_resource, token_max);
    FIELD(struct, dcmi_base_resource, task_timeout);
    FIELD(struct, dcmi_base_resource, vfg_id);
    FIELD(struct, dcmi_base_resource, vip_mode);
    FIELD(struct, dcmi_base_resource, reserved);

    SIZE(struct, dcmi_computing_resource);
    FIELD(struct, dcmi_computing_resource, aic);
    FIELD(struct, dcmi_computing_resource, aiv);
    FIELD(struct, dcmi_computing_resource, dsa);
    FIELD(struct, dcmi_computing_resource, rtsq);
    FIELD(struct, dcmi_computing_resource, acsq);
    FIELD(struct, dcmi_computing_resource, cdqm);
    FIELD(struct, dcmi_computing_resource, c_core);
    FIELD(struct, dcmi_computing_resource, ffts);
    FIELD(struct, dcmi_computing_resource, sdma);
    FIELD(struct, dcmi_computing_resource, pcie_dma);
    FIELD(struct, dcmi_computing_resource, memory_size);
    FIELD(struct, dcmi_computing_resource, event_id);
    FIELD(struct, dcmi_computing_resource, notify_id);
    FIELD(struct, dcmi_computing_resource, stream_id);
    FIELD(struct, dcmi_computing_resource, model_id);
    FIELD(struct, dcmi_computing_resource, topic_schedule_aicpu);
    FIELD(struct, dcmi_computing_resource, host_ctrl_cpu);
    FIELD(struct, dcmi_computing_resource, host_aicpu);
    FIELD(struct, dcmi_computing_resource, device_aicpu);
    FIELD(struct, dcmi_computing_resource, topic_ctrl_cpu_slot);
    FIELD(struct, dcmi_computing_resource, vdev_aicore_utilization);
    FIELD(struct, dcmi_computing_resource, vdev_memory_total);
    FIELD(struct, dcmi_computing_resource, vdev_memory_free);
    FIELD(struct, dcmi_computing_resource, reserved);

    SIZE(struct, dcmi_media_resource);
    FIELD(struct, dcmi_media_resource, jpegd);
    FIELD(struct, dcmi_media_resource, jpege);
    FIELD(struct, dcmi_media_resource, vpc);
    FIELD(struct, dcmi_media_resource, vdec);
    FIELD(struct, dcmi_media_resource, pngd);
    FIELD(struct, dcmi_media_resource, venc);
    FIELD(struct, dcmi_media_resource, reserved);

    SIZE(struct, dcmi_vdev_query_info);
    FIELD(struct, dcmi_vdev_query_info, name);
    FIELD(struct, dcmi_vdev_query_info, status);
    FIELD(struct, dcmi_vdev_query_info, is_container_used);
    FIELD(struct, dcmi_vdev_query_info, vfid);
    FIELD(struct, dcmi_vdev_query_info, vfg_id);
    FIELD(struct, dcmi_vdev_query_info, container_id);
    FIELD(struct, dcmi_vdev_query_info, base);
    FIELD(struct, dcmi_vdev_query_info, computing);
    FIELD(struct, dcmi_vdev_query_info, media);

    SIZE(struct, dcmi_vdev_query_stru);
    FIELD(struct, dcmi_vdev_query_stru, vdev_id);
    FIELD(struct, dcmi_vdev_query_stru, query_info);
    return 0;
}
