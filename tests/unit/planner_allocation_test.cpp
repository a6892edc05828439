// A reused planner allocates nothing once it has seen a matrix's sizes (MoE plans on every layer
// call). Its own executable: it replaces the global operator new to count allocations.
#include "../support.hpp"
#include "rank_program_check.hpp"

#include <fast/counts.hpp>
#include <fast/fabric.hpp>
#include <fast/planner.hpp>
#include <fast/workload.hpp>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

namespace {
std::atomic<long> allocations{0};
}

// The replacement pairs malloc with free; g++ cannot see that operator new is malloc here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t n) {
    allocations.fetch_add(1, std::memory_order_relaxed);
    if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
    throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
    std::free(p);
}

using namespace fast;

TEST_CASE("planning again with a reused planner allocates nothing") {
    for (const scheduler sch : {scheduler::automatic, scheduler::fast})
        for (const policy p : {policy::rail_packed, policy::bottleneck}) {
            for (const int servers : {2, 4, 16}) {
                const topology t = make_topology(servers, 8);
                for (int w = 0; w < 2; ++w) {
                    const traffic_matrix m =
                        w == 0 ? make_zipf(t, 0.8, 1 << 26, 7) : make_moe(t, moe_options{}, 1 << 26, 7);
                    plan_options o;
                    o.policy = p;
                    o.scheduler = sch;
                    planner reused(t, o);
                    (void)reused.make(m); // sizes every buffer
                    const long before = allocations.load();
                    const plan& again = reused.make(m);
                    const long during = allocations.load() - before;
                    INFO(to_string(sch) << ", policy " << to_string(p) << ", " << servers << " x 8, workload " << w);
                    CHECK(during == 0);
                    fast::test::check_plan(again, m);
                }
            }
        }
}

TEST_CASE("planning ranks' programs again with a reused planner allocates nothing") {
    for (const policy p : {policy::rail_packed, policy::bottleneck}) {
        const topology t = make_topology(8, 8);
        const traffic_matrix m = make_moe(t, moe_options{}, 1 << 26, 7);
        plan_options o;
        o.policy = p;
        planner reused(t, o);
        // The programs are the verified whole plan's parts; making them sizes every buffer.
        fast::test::check_rank_programs(reused, m);
        INFO("policy " << to_string(p)); // before counting: it allocates
        const long before = allocations.load();
        std::size_t transfers = 0;
        for (int r = 0; r < t.ranks(); ++r) transfers += reused.make_rank(m, r).transfers.size();
        CHECK(allocations.load() - before == 0);
        CHECK(transfers > 0);
    }
}

TEST_CASE("on uneven NIC rates, a reused planner allocates nothing either") {
    fabric f = preset_fabric(preset::h200, 4, 8);
    f.nics[1].gbps = 12.5; // a slow NIC
    f.nics[9].gbps = 0;    // and a down one
    const topology t = planning_topology(f);
    const traffic_matrix m = make_moe(t, moe_options{}, 1 << 26, 7);
    planner reused(f);
    REQUIRE_FALSE(reused.nic_rates().empty());
    (void)reused.make(m); // sizes every buffer
    long before = allocations.load();
    const plan& again = reused.make(m);
    CHECK(allocations.load() - before == 0);
    fast::test::check_plan(again, m);
    // Each rank's program from the counts it agreed on, as the executor plans it.
    const shared_counts all = make_shared_counts(m, t);
    std::vector<server_counts> own;
    for (int s = 0; s < t.servers; ++s) own.push_back(make_server_counts(m, t, s));
    for (int r = 0; r < t.ranks(); ++r) (void)reused.make_rank(all, own[static_cast<std::size_t>(t.server_of(r))], r);
    before = allocations.load();
    std::size_t transfers = 0;
    for (int r = 0; r < t.ranks(); ++r)
        transfers += reused.make_rank(all, own[static_cast<std::size_t>(t.server_of(r))], r).transfers.size();
    CHECK(allocations.load() - before == 0);
    CHECK(transfers > 0);
}
