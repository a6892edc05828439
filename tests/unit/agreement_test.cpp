#include "../support.hpp"

#include <fast/agreement.hpp>

using namespace fast;

TEST_CASE("the servers agreement sends each rank O(S (S + G)) numbers, the gather R^2") {
    // 32, 256 and 1024 ranks of 8 GPUs per server.
    const topology small = make_topology(4, 8);
    const topology mid = make_topology(32, 8);
    const topology large = make_topology(128, 8);
    for (const topology& t : {small, mid, large}) {
        const agreement gather = agreement_of(t, agreement_kind::gather);
        const agreement servers = agreement_of(t, agreement_kind::servers);
        INFO(t.ranks() << " ranks");
        const std::int64_t r = t.ranks();
        CHECK(gather.rounds == 1);
        CHECK(gather.network_bytes == (r - 8) * (agreement_header_bytes + 16 * r));
        CHECK(servers.rounds == 4);
        CHECK(servers.network_bytes ==
              (t.servers - 1) * (agreement_header_bytes + 8 * (static_cast<std::int64_t>(server_part_size(t)) + 8) +
                                 agreement_finding_bytes));
        CHECK(servers.local_bytes == 7 * (agreement_header_bytes + 16 * r + agreement_finding_bytes));
    }
    // The target: at most 256 KiB over the network per rank at 1024 ranks (the gather: 16 MB).
    CHECK(agreement_of(large, agreement_kind::servers).network_bytes <= 256 * 1024);
    CHECK(agreement_of(large, agreement_kind::gather).network_bytes > 16'000'000);
    // The model's choice: one round while the matrix is small, the servers' from a few hundred
    // ranks on.
    CHECK(plan_agreement(small).kind == agreement_kind::gather);
    CHECK(plan_agreement(large).kind == agreement_kind::servers);
    CHECK(plan_agreement(mid).kind == agreement_kind::servers);
    CHECK(plan_agreement(make_topology(1, 1)).us == 0);
}
