"""The reference's tests of the ResetInfo annotation, ported to fault_manager.hotreset.reset_info.

One test per Go test, named after it, one block per convey case; where the Go test mocks the
node client or json, the port checks what is observable instead: the annotation text a write
yields (None where the reference writes nothing) and the state that results.

- pkg/device/reset_info_mgr_test.go: every test.
- pkg/server/hot_reset_manager_test.go: TestFilterOpsDevices, TestMarkNeedExternalOps,
  TestClearNeedExternalOps1/2/3 (what the callers delete and add).
- pkg/server/manager_test.go: TestCheckNodeResetInfo, TestCheckDeviceStatus,
  TestCheckOverRetryDev (what heals the lists).
"""

from __future__ import annotations

import pytest
from fault_manager.hotreset.reset_info import (
    EMPTY,
    MAX_RESET_TIMES,
    RESET_INFO_ANNOTATION,
    ResetDevice,
    ResetInfo,
    ResetInfoManager,
    WriteMode,
    check_device_status,
    check_node_reset_info,
    check_over_retry_dev,
    clear_need_external_ops,
    deduplicate,
    exclude_array,
    external_ops_to_clear,
    filter_ops_devices,
    mark_need_external_ops,
    merge_and_deduplicate,
    merge_fail_devs,
    read_annotation,
    render_reset_info,
)

TEST_LOGIC_ID = 0
ID1, ID2, ID3 = 1, 2, 3
ZERO_VAL = 0


def _phy(phy_id: int) -> ResetDevice:
    return ResetDevice(phy_id=phy_id)


# --- pkg/device/reset_info_mgr_test.go --------------------------------------------------------------


def test_write_reset_info() -> None:
    # 01-write cache success, flag should be true: a write with the node update on yields the
    # annotation text to put on the node.
    mgr = ResetInfoManager()
    text = mgr.write(ResetInfo(), WriteMode.OVERWRITE, update_node=True)
    assert text == '{"ThirdPartyResetDevs":[],"ManualResetDevs":[]}'

    # 02-json marshal failed, flag should be false: marshalling this struct cannot fail in Go
    # either (ints only); the one failure left, an id outside int32, is refused when the entry
    # is built, so nothing reaches the manager and nothing is written.
    with pytest.raises(ValueError, match="out of int32 range"):
        mgr.write(ResetInfo(manual_reset_devs=(ResetDevice(phy_id=2**31),)), WriteMode.OVERWRITE)
    assert mgr.info == EMPTY


def test_is_dev_busy() -> None:
    mgr = ResetInfoManager()
    mgr.add_busy_dev(TEST_LOGIC_ID)
    assert mgr.is_dev_busy(TEST_LOGIC_ID)


def test_free_busy_dev() -> None:
    mgr = ResetInfoManager()
    mgr.add_busy_dev(TEST_LOGIC_ID)
    mgr.free_busy_dev(TEST_LOGIC_ID)
    assert not mgr.is_dev_busy(TEST_LOGIC_ID)


def test_get_reset_cnt() -> None:
    test_num = 1
    mgr = ResetInfoManager()
    assert mgr.get_reset_cnt(TEST_LOGIC_ID) == ZERO_VAL  # never set
    # 01-not exist, should return 0 (the Go case sets 0 first)
    mgr.set_reset_cnt(TEST_LOGIC_ID, ZERO_VAL)
    assert mgr.get_reset_cnt(TEST_LOGIC_ID) == ZERO_VAL
    # 02-set to 1, should return 1
    mgr.set_reset_cnt(TEST_LOGIC_ID, test_num)
    assert mgr.get_reset_cnt(TEST_LOGIC_ID) == test_num


def test_add_reset_cnt() -> None:
    mgr = ResetInfoManager()
    mgr.set_reset_cnt(TEST_LOGIC_ID, ZERO_VAL)
    mgr.add_reset_cnt(TEST_LOGIC_ID)
    assert mgr.get_reset_cnt(TEST_LOGIC_ID) == 1


def test_set_reset_cnt() -> None:
    mgr = ResetInfoManager()
    mgr.set_reset_cnt(TEST_LOGIC_ID, 1)
    assert mgr.get_reset_cnt(TEST_LOGIC_ID) == 1


def test_merge_and_deduplicate() -> None:
    arr1 = (_phy(ID1), _phy(ID2))
    arr2 = (_phy(ID2), _phy(ID3))
    assert merge_and_deduplicate(arr1, arr2) == (_phy(ID1), _phy(ID2), _phy(ID3))


def test_read_reset_node_annotation() -> None:
    mgr = ResetInfoManager()
    mgr.write(ResetInfo(manual_reset_devs=(_phy(0),)), WriteMode.OVERWRITE, update_node=True)
    assert len(mgr.info.manual_reset_devs) > 0


def test_write_node_annotation() -> None:
    # enter AddAnnotation, flag should be true: the reference writes the whole state under the
    # node annotation key "ResetInfo"; here the write hands that text back for the caller to put.
    mgr = ResetInfoManager()
    assert RESET_INFO_ANNOTATION == "ResetInfo"
    assert mgr.write(EMPTY, WriteMode.APPEND) is not None
    assert mgr.write(EMPTY, WriteMode.APPEND, update_node=False) is None


def test_merge_fail_devs() -> None:
    cur_devs = (_phy(ID1),)
    new_devs = (_phy(ID2),)
    # 01-overwrite mode, should return newDevs
    assert merge_fail_devs(cur_devs, new_devs, WriteMode.OVERWRITE) == new_devs
    # 02-append mode, should merge devs
    assert merge_fail_devs(cur_devs, new_devs, WriteMode.APPEND) == cur_devs + new_devs


def test_read_annotation() -> None:
    key = "test"
    # 01-key not exists, should return empty info
    info, error = read_annotation({}, key)
    assert info.third_party_reset_devs == () and error is None
    # 02-unmarshal error, should return empty info
    info, error = read_annotation({key: "test"}, key)
    assert info.third_party_reset_devs == ()
    assert isinstance(error, ValueError)
    # 03-success, should return info (the Go case mocks json.Unmarshal; here the value is real)
    res = ResetInfo(manual_reset_devs=(_phy(ID1),))
    info, error = read_annotation({key: render_reset_info(res)}, key)
    assert (info, error) == (res, None)


def test_deduplicate() -> None:
    assert deduplicate((ResetDevice(), ResetDevice())) == (ResetDevice(),)


def test_exclude_array() -> None:
    cur_arr = (_phy(0), _phy(1))
    del_arr = (_phy(1),)
    assert exclude_array(cur_arr, del_arr) == (_phy(0),)


def test_init_reset_info_mgr() -> None:
    # 01-get node error, mgr resetInfo should be empty
    mgr, error = ResetInfoManager.from_annotations(None)
    assert mgr.info is not None
    assert mgr.info.manual_reset_devs == () and error is None
    # 02-node annotations exist, mgr resetInfo should not be empty: the Go case marshals its
    # zero-valued third-party list as null, which reads back as empty.
    reset_info = ResetInfo(manual_reset_devs=(_phy(ID1), _phy(ID2)))
    data = (  # json.Marshal(resetInfo) in the Go case
        '{"ThirdPartyResetDevs":null,"ManualResetDevs":['
        '{"CardId":0,"DeviceId":0,"AssociatedCardId":0,"PhyID":1,"LogicID":0},'
        '{"CardId":0,"DeviceId":0,"AssociatedCardId":0,"PhyID":2,"LogicID":0}]}'
    )
    mgr, error = ResetInfoManager.from_annotations({RESET_INFO_ANNOTATION: data})
    assert mgr.info == reset_info and error is None


# --- pkg/server/hot_reset_manager_test.go -----------------------------------------------------------


def test_filter_ops_devices() -> None:
    # should filter only devices present in resetInfo
    reset_info = ResetInfo(manual_reset_devs=(ResetDevice(logic_id=0), ResetDevice(logic_id=1)))
    assert filter_ops_devices(reset_info, [0, 1, 2, 3]) == [0, 1]
    # should return empty when no match
    assert filter_ops_devices(ResetInfo(), [0, 1]) == []


def test_mark_need_external_ops() -> None:
    # should write reset info with WMAppend
    dev = ResetDevice(logic_id=7, card_id=0, device_id=1, phy_id=10)
    info = mark_need_external_ops(EMPTY, dev)
    assert len(info.manual_reset_devs) == 1
    (written,) = info.manual_reset_devs
    assert (written.logic_id, written.card_id, written.device_id, written.phy_id) == (7, 0, 1, 10)
    assert len(info.third_party_reset_devs) == 0
    # appended, not overwritten: an entry already listed stays
    other = ResetDevice(logic_id=1, phy_id=1)
    assert mark_need_external_ops(ResetInfo(manual_reset_devs=(other,)), dev).manual_reset_devs == (other, dev)
    # should write device with default CardID
    dev = ResetDevice(logic_id=3, card_id=-1, device_id=-1, phy_id=5)
    (written,) = mark_need_external_ops(EMPTY, dev).manual_reset_devs
    assert (written.card_id, written.device_id, written.phy_id) == (-1, -1, 5)


def test_clear_need_external_ops1() -> None:
    # no devices in reset info should return early
    assert clear_need_external_ops(ResetInfo(), [ResetDevice()]) is None
    # device in ManualResetDevs should be cleared
    dev = ResetDevice(logic_id=7, card_id=0, device_id=1, phy_id=10)
    reset_info = ResetInfo(manual_reset_devs=(dev,))
    assert external_ops_to_clear(reset_info, [dev]) == (dev,)  # deleted from both lists
    assert clear_need_external_ops(reset_info, [dev]) == EMPTY


def test_clear_need_external_ops2() -> None:
    # device in ThirdPartyResetDevs should be cleared
    dev = ResetDevice(logic_id=2, card_id=1, device_id=0, phy_id=3)
    reset_info = ResetInfo(third_party_reset_devs=(dev,))
    assert external_ops_to_clear(reset_info, [dev]) == (dev,)
    assert clear_need_external_ops(reset_info, [dev]) == EMPTY
    # device not in reset info should not trigger write
    listed = ResetDevice(logic_id=3, phy_id=3)
    assert clear_need_external_ops(ResetInfo(manual_reset_devs=(listed,)), [ResetDevice(logic_id=5, phy_id=5)]) is None


def test_clear_need_external_ops3() -> None:
    # multiple devices partial match should only clear matched ones
    dev0 = ResetDevice(logic_id=0, card_id=0, device_id=0, phy_id=0)
    dev1 = ResetDevice(logic_id=1, card_id=0, device_id=1, phy_id=1)
    reset_info = ResetInfo(manual_reset_devs=(dev0, dev1), third_party_reset_devs=(dev0,))
    assert external_ops_to_clear(reset_info, [dev0, dev1]) == (dev0, dev1)  # both lists get both
    assert clear_need_external_ops(reset_info, [dev0, dev1]) == EMPTY
    # empty devs slice should return early
    assert clear_need_external_ops(reset_info, []) is None


# --- pkg/server/manager_test.go ---------------------------------------------------------------------


def test_check_node_reset_info() -> None:
    # 01-client nil, flag should be false: without a node client the caller never runs the
    # check; nothing here to port.
    reset_info = ResetInfo(third_party_reset_devs=(_phy(0),))
    # 02-get npus error, flag should be false: no healthy chip, nothing changes, nothing written
    assert check_node_reset_info(reset_info, set(), lambda _: 0) is None
    # 03-success, flag should be true: the listed chip is healthy again
    assert check_node_reset_info(reset_info, {0}, lambda _: 0) == EMPTY


def test_check_device_status() -> None:
    # 01-status change, should return true
    fail_devs = (_phy(ID1), _phy(ID2), _phy(ID3))
    kept, is_change = check_device_status(fail_devs, {ID1})
    assert is_change
    assert kept == (_phy(ID2), _phy(ID3))


def test_check_over_retry_dev() -> None:
    reset_info = ResetInfo(third_party_reset_devs=(ResetDevice(card_id=0),), manual_reset_devs=())
    # 01-over retry time, dev should be add to manualDev
    ret = check_over_retry_dev(reset_info, lambda _: MAX_RESET_TIMES + 1)
    assert len(ret.manual_reset_devs) == 1
    # 02-not over retry times, dev be add to third party
    ret = check_over_retry_dev(reset_info, lambda _: MAX_RESET_TIMES - 1)
    assert len(ret.manual_reset_devs) == 0
