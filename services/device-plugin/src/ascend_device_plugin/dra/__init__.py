"""The DRA driver `npu.huawei.com`: the kubelet's second API, fed by the same resource manager. The
ResourceSlice's devices (slice_devices), a claim's preparation (claims) and the health reports
(health_reports) are pure; the rest is the driver's I/O."""
