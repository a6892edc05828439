#include "../support.hpp"

#include <fast/baselines.hpp>
#include <fast/layout.hpp>

using namespace fast;

namespace {

// 2 servers x 2 GPUs; rank 0 sends 100 to rank 2 and 50 to rank 1, rank 3 sends 30 to rank 2.
struct fixture {
    topology topo = make_topology(2, 2);
    traffic_matrix m = traffic_matrix::Zero(4, 4);
    fixture() {
        m(0, 1) = 50;
        m(0, 2) = 100;
        m(3, 2) = 30;
    }
    plan direct() const { return make_direct_plan(m, topo); }
};

// One end of a transfer: a rank's buffer at an offset.
struct end {
    int rank;
    buffer buf;
    std::int64_t offset;
};

// `bytes` from `from` to `to` over `t`.
transfer transfer_between(end from, end to, std::int64_t bytes, tier t) {
    transfer x;
    x.src = from.rank;
    x.src_buffer = from.buf;
    x.src_offset = from.offset;
    x.dst = to.rank;
    x.dst_buffer = to.buf;
    x.dst_offset = to.offset;
    x.bytes = bytes;
    x.tier = t;
    return x;
}

violation_kind kind_of(const plan& p, const traffic_matrix& m) {
    const verification v = verify(p, m);
    INFO(v.message());
    REQUIRE_FALSE(v.ok());
    return v.error->kind;
}

} // namespace

TEST_CASE("a correct plan through scratch verifies") {
    fixture f;
    plan p;
    p.topology = f.topo;
    p.scheduler = "hand";
    p.one_to_one_scale_out = true;
    p.scratch_bytes = {0, 100, 0, 0};
    // Rank 0's block for rank 2 takes the long way: scale-up to rank 1's scratch, scale-out on
    // rail 1 to rank 3's scratch, scale-up into rank 2's recv.
    p.transfers.push_back(transfer_between({0, buffer::send, 0}, {1, buffer::recv, 0}, 50, tier::scale_up));
    p.transfers.push_back(transfer_between({0, buffer::send, 50}, {1, buffer::scratch, 0}, 100, tier::scale_up));
    p.end_step();
    p.transfers.push_back(transfer_between({1, buffer::scratch, 0}, {3, buffer::scratch, 0}, 100, tier::scale_out));
    p.transfers.push_back(transfer_between({3, buffer::send, 0}, {2, buffer::recv, 100}, 30, tier::scale_up));
    p.end_step();
    p.transfers.push_back(transfer_between({3, buffer::scratch, 0}, {2, buffer::recv, 0}, 100, tier::scale_up));
    p.end_step();
    p.scratch_bytes[3] = 100;
    const verification v = fast::test::check_plan(p, f.m);
    CHECK(v.one_to_one_scale_out);
}

TEST_CASE("the baselines verify on the fixture; direct is not one-to-one") {
    fixture f;
    fast::test::check_plan(f.direct(), f.m);
    f.m(1, 2) = 7; // rank 2 now receives from ranks 0 and 1 over scale-out in one step
    const verification v = fast::test::check_plan(f.direct(), f.m);
    CHECK_FALSE(v.one_to_one_scale_out);
    fast::test::check_plan(make_spreadout_plan(f.m, f.topo), f.m);
}

TEST_CASE("each violation kind is caught and located") {
    fixture f;
    const plan good = f.direct();
    REQUIRE(verify(good, f.m).ok());
    // direct's transfers, in order: 0->1 (50), 0->2 (100), 3->2 (30).

    SECTION("malformed structure") {
        plan p = good;
        p.step_offsets.back() = 1;
        CHECK(kind_of(p, f.m) == violation_kind::malformed);
        p = good;
        p.transfers[1].dst = 9;
        CHECK(kind_of(p, f.m) == violation_kind::malformed);
        p = good;
        p.transfers[1].bytes = 0;
        CHECK(kind_of(p, f.m) == violation_kind::malformed);
        p = good;
        p.scratch_bytes.pop_back();
        CHECK(kind_of(p, f.m) == violation_kind::malformed);
        CHECK(kind_of(good, traffic_matrix::Zero(2, 2)) == violation_kind::malformed);
    }
    SECTION("bad buffer") {
        plan p = good;
        p.transfers[0].src_buffer = buffer::recv;
        CHECK(kind_of(p, f.m) == violation_kind::bad_buffer);
        p = good;
        p.transfers[0].dst_buffer = buffer::send;
        CHECK(kind_of(p, f.m) == violation_kind::bad_buffer);
    }
    SECTION("out of bounds") {
        plan p = good;
        p.transfers[1].src_offset = 60;
        const verification v = verify(p, f.m);
        REQUIRE_FALSE(v.ok());
        CHECK(v.error->kind == violation_kind::out_of_bounds);
        CHECK(v.error->step == 0);
        CHECK(v.error->transfer == 1);
        CHECK(v.error->rank == 0);
        CHECK_THAT(v.message(), Catch::Contains("reads past the end of rank 0's send (150 bytes)"));
        p = good;
        p.transfers[2].dst_offset = std::numeric_limits<std::int64_t>::max();
        CHECK(kind_of(p, f.m) == violation_kind::out_of_bounds);
    }
    SECTION("tier mismatch") {
        plan p = good;
        p.transfers[1].tier = tier::scale_up;
        CHECK(kind_of(p, f.m) == violation_kind::tier_mismatch);
        p = good;
        p.transfers[0].tier = tier::scale_out;
        CHECK(kind_of(p, f.m) == violation_kind::tier_mismatch);
    }
    SECTION("read before written") {
        plan p = good;
        p.scratch_bytes[0] = 100;
        p.transfers[1].src_buffer = buffer::scratch;
        p.transfers[1].src_offset = 0;
        const verification v = verify(p, f.m);
        REQUIRE_FALSE(v.ok());
        CHECK(v.error->kind == violation_kind::read_before_written);
        CHECK_THAT(v.message(), Catch::Contains("rank 0's scratch at offset 0 holds no data"));
    }
    SECTION("read/write conflict and overlapping writes in one step") {
        plan p;
        p.topology = f.topo;
        p.scratch_bytes = {200, 0, 0, 0};
        p.transfers.push_back(transfer_between({0, buffer::send, 50}, {0, buffer::scratch, 0}, 100, tier::scale_up));
        p.end_step();
        // Step 1 sends the staged block and overwrites part of it in the same step.
        p.transfers.push_back(transfer_between({0, buffer::scratch, 0}, {2, buffer::recv, 0}, 100, tier::scale_out));
        p.transfers.push_back(transfer_between({0, buffer::send, 0}, {0, buffer::scratch, 60}, 50, tier::scale_up));
        p.end_step();
        CHECK(kind_of(p, f.m) == violation_kind::read_write_conflict);
        p.transfers[1] = transfer_between({0, buffer::send, 50}, {0, buffer::scratch, 100}, 100, tier::scale_up);
        p.transfers[2] = transfer_between({0, buffer::send, 0}, {0, buffer::scratch, 150}, 50, tier::scale_up);
        CHECK(kind_of(p, f.m) == violation_kind::overlapping_writes);
    }
    SECTION("wrong place") {
        plan p = good;
        p.transfers[2].dst_offset = 0;
        p.transfers[1].dst_offset = 30;
        const verification v = verify(p, f.m);
        REQUIRE_FALSE(v.ok());
        CHECK(v.error->kind == violation_kind::wrong_place);
        CHECK_THAT(v.message(), Catch::Contains("belong to rank 2's recv at offset 0"));
        p = good;
        p.transfers[1].dst = 3; // block 0->2 into rank 3's recv, which expects nothing from 0
        p.transfers[1].dst_offset = 0;
        p.transfers[1].bytes = 50;
        p.transfers[2].bytes = 30;
        CHECK(kind_of(p, f.m) == violation_kind::out_of_bounds); // rank 3 receives 0 bytes
    }
    SECTION("delivered twice") {
        plan p = good;
        p.transfers.push_back(p.transfers[2]);
        p.end_step();
        CHECK(kind_of(p, f.m) == violation_kind::delivered_twice);
    }
    SECTION("not delivered") {
        plan p = good;
        p.transfers.erase(p.transfers.begin() + 2);
        p.step_offsets.back() = 2;
        const verification v = verify(p, f.m);
        REQUIRE_FALSE(v.ok());
        CHECK(v.error->kind == violation_kind::not_delivered);
        CHECK(v.error->rank == 2);
        CHECK(v.error->offset == 100);
        CHECK_THAT(v.message(), Catch::Contains("block 3->2, block offset 0) is never written"));
        p = good;
        p.transfers[1].bytes = 60; // only part of block 0->2
        CHECK(kind_of(p, f.m) == violation_kind::not_delivered);
    }
    SECTION("incast and fan-out in plans that claim one-to-one") {
        fixture g;
        g.m(1, 2) = 7;
        plan p = g.direct();
        p.one_to_one_scale_out = true;
        CHECK(kind_of(p, g.m) == violation_kind::incast);
        fixture h;
        h.m(0, 3) = 9;
        plan q = h.direct();
        q.one_to_one_scale_out = true;
        CHECK(kind_of(q, h.m) == violation_kind::fan_out);
    }
    SECTION("scale-out through a NIC that is down, and rates that are not one per rank") {
        plan p = good;
        p.nic_gbps = {50, 50, 0, 50}; // rank 2 receives over scale-out
        const verification v = verify(p, f.m);
        REQUIRE_FALSE(v.ok());
        CHECK(v.error->kind == violation_kind::down_nic);
        CHECK(v.error->rank == 2);
        CHECK_THAT(v.message(), Catch::Contains("through rank 2's NIC, which is down"));
        p.nic_gbps = {50, 0, 50, 50}; // rank 1 only receives over scale-up
        CHECK(verify(p, f.m).ok());
        p.nic_gbps = {50, 50};
        CHECK(kind_of(p, f.m) == violation_kind::malformed);
        p.nic_gbps = {50, 50, -1, 50};
        CHECK(kind_of(p, f.m) == violation_kind::malformed);
    }
}

TEST_CASE("scratch may be reused once its reader's step is over") {
    fixture f;
    plan p;
    p.topology = f.topo;
    p.one_to_one_scale_out = true;
    p.scratch_bytes = {100, 0, 0, 0};
    // Rank 0 stages its 100-byte block in scratch, sends it, then stages the 50-byte block in
    // the same place and copies it to rank 1.
    p.transfers.push_back(transfer_between({0, buffer::send, 50}, {0, buffer::scratch, 0}, 100, tier::scale_up));
    p.end_step();
    p.transfers.push_back(transfer_between({0, buffer::scratch, 0}, {2, buffer::recv, 0}, 100, tier::scale_out));
    p.transfers.push_back(transfer_between({3, buffer::send, 0}, {2, buffer::recv, 100}, 30, tier::scale_up));
    p.end_step();
    p.transfers.push_back(transfer_between({0, buffer::send, 0}, {0, buffer::scratch, 20}, 50, tier::scale_up));
    p.end_step();
    p.transfers.push_back(transfer_between({0, buffer::scratch, 20}, {1, buffer::recv, 0}, 50, tier::scale_up));
    p.end_step();
    fast::test::check_plan(p, f.m);
    // Reading the overwritten first block again is caught: it is not in scratch any more whole.
    p.transfers.push_back(transfer_between({0, buffer::scratch, 0}, {2, buffer::recv, 0}, 100, tier::scale_out));
    p.end_step();
    const verification v = verify(p, f.m);
    REQUIRE_FALSE(v.ok());
    CHECK(v.error->kind == violation_kind::delivered_twice);
}
