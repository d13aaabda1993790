"""The DRA driver `npu.huawei.com`: the kubelet's second API, fed by the same resource manager."""
