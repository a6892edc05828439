#include "../support.hpp"

#include <fast/baselines.hpp>

using namespace fast;
using fast::test::out;

TEST_CASE("one transfer costs alpha + bytes / bandwidth") {
    const topology t = make_topology(2, 1); // 50 GB/s, 10 us
    traffic_matrix m = traffic_matrix::Zero(2, 2);
    m(0, 1) = 1'000'000; // 20 us at 50 GB/s
    const plan p = make_direct_plan(m, t);
    fast::test::check_plan(p, m);
    CHECK(predict_us(p) == Approx(30.0));
    CHECK(lower_bound_us(m, t) == Approx(30.0));
}

TEST_CASE("on an uneven fabric each rank's NIC runs at its own rate; a transfer at the slower end's") {
    const topology t = make_topology(2, 1); // 50 GB/s, 10 us
    traffic_matrix m = traffic_matrix::Zero(2, 2);
    m(0, 1) = 1'000'000;
    plan p = make_direct_plan(m, t);
    p.nic_gbps = {50, 12.5}; // 80 us at the receiver's rate
    fast::test::check_plan(p, m);
    CHECK(predict_us(p) == Approx(90.0));
    p.nic_gbps = {25, 100};
    CHECK(predict_us(p) == Approx(50.0));
}

TEST_CASE("a port's transfers in one step form one batch") {
    const topology t = make_topology(3, 1);
    traffic_matrix m = traffic_matrix::Zero(3, 3);
    m(0, 2) = 500'000;
    m(1, 2) = 500'000; // rank 2 receives both in one step: one batch of 1 MB
    const plan p = make_direct_plan(m, t);
    fast::test::check_plan(p, m);
    CHECK(predict_us(p) == Approx(10.0 + 20.0));
    const prediction sim = simulate(p, true);
    CHECK(sim.rank_finish_us[2] == Approx(30.0));
    // Rank 0's own port is done after 10 + 10 us, but its transfer ends with rank 2's batch.
    CHECK(sim.rank_finish_us[0] == Approx(30.0));
    std::size_t batches = 0;
    for (const port_batch& b : sim.batches)
        if (b.rank == 2 && b.port == port::out_recv) {
            ++batches;
            CHECK(b.bytes == 1'000'000);
        }
    CHECK(batches == 1);
}

TEST_CASE("no global barrier: ranks that share no transfer run at their own pace") {
    const topology t = make_topology(4, 1);
    traffic_matrix m = traffic_matrix::Zero(4, 4);
    m(0, 1) = 5'000'000; // 100 us
    m(1, 0) = 5'000'000;
    m(2, 3) = 500'000; // 10 us
    m(3, 2) = 500'000;
    plan p;
    p.topology = t;
    p.scratch_bytes.assign(4, 0);
    // Step 0: 0<->1 (long) and 2 -> 3; step 1: 3 -> 2. Rank 3's second step must not wait for 0/1.
    p.transfers = {out(0, 1, 5'000'000), out(1, 0, 5'000'000), out(2, 3, 500'000)};
    p.end_step();
    p.transfers.push_back(out(3, 2, 500'000));
    p.end_step();
    fast::test::check_plan(p, m);
    const prediction sim = simulate(p);
    CHECK(sim.rank_finish_us[3] == Approx(40.0));
    CHECK(sim.rank_finish_us[0] == Approx(110.0));
    CHECK(sim.completion_us == Approx(110.0));
}

TEST_CASE("a step starts when both ends have started it") {
    const topology t = make_topology(3, 1);
    traffic_matrix m = traffic_matrix::Zero(3, 3);
    m(0, 1) = 5'000'000;
    m(2, 1) = 500'000;
    plan p;
    p.topology = t;
    p.scratch_bytes.assign(3, 0);
    p.transfers = {out(0, 1, 5'000'000)};
    p.end_step();
    p.transfers.push_back(out(2, 1, 500'000, 0, 5'000'000));
    p.end_step();
    fast::test::check_plan(p, m);
    // Rank 2 is free at 0 but rank 1 starts step 1 only at 110 us.
    CHECK(predict_us(p) == Approx(110.0 + 20.0));
}

TEST_CASE("lower bound: the busiest server's inter-server bytes over its G NICs") {
    const topology t = make_topology(2, 2); // 2 NICs x 50 GB/s per server
    traffic_matrix m = traffic_matrix::Zero(4, 4);
    m(0, 2) = 3'000'000;
    m(1, 3) = 1'000'000;
    m(2, 0) = 1'000'000;
    m(0, 1) = 100'000'000; // intra-server: 450 GB/s: 222 us + 3 us beats 10 + 40 us
    CHECK(lower_bound_us(m, t) == Approx(3.0 + 100'000'000 / 450e3));
    m(0, 1) = 0;
    CHECK(lower_bound_us(m, t) == Approx(10.0 + 4'000'000 / 100e3));
    CHECK(lower_bound_us(traffic_matrix::Zero(4, 4), t) == 0.0);
}

TEST_CASE("a port that moves 2^63 bytes or more in one step is costed, not wrapped") {
    // One server of 4 GPUs: rank 0 sends its 2^62-byte block to rank 1 and, in the same step,
    // the same bytes to the scratch of ranks 2 and 3 (reads never conflict). A valid plan whose
    // scale-up send port moves 3 x 2^62 bytes in one step, beyond int64.
    const topology t = make_topology(1, 4);
    constexpr std::int64_t block = std::int64_t{1} << 62;
    traffic_matrix m = traffic_matrix::Zero(4, 4);
    m(0, 1) = block;
    plan p;
    p.topology = t;
    p.scratch_bytes = {0, 0, block, block};
    for (int dst = 1; dst < 4; ++dst) {
        transfer x = out(0, dst, block);
        x.tier = tier::scale_up;
        x.dst_buffer = dst == 1 ? buffer::recv : buffer::scratch;
        p.transfers.push_back(x);
    }
    p.end_step();
    fast::test::check_plan(p, m);
    const double want = t.alpha_up_us + 3.0 * static_cast<double>(block) / (t.scale_up_gbps * 1e3);
    CHECK(predict_us(p) == Approx(want));
    const prediction sim = simulate(p, true);
    bool seen = false;
    for (const port_batch& b : sim.batches)
        if (b.rank == 0 && b.port == port::up_send) {
            seen = true;
            CHECK(b.bytes == INT64_MAX); // the recorded figure saturates
            CHECK(b.end_us - b.start_us == Approx(want));
        }
    CHECK(seen);
}
