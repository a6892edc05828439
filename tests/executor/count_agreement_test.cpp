// The count agreement (executor/src/count_agreement.hpp) without a transport: every rank's side
// of the gather and the servers agreement run in one process, round by round, each message
// copied where the exchange would put it. Both must give every rank the counts the planner needs
// (equal to those of the whole matrix), and the same status on every rank for mismatched counts,
// rejected arguments, ranks in different calls and sums beyond int64; and the bytes a rank
// receives must be those fast::agreement_of models.

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <fast/agreement.hpp>
#include <fast/counts.hpp>

#include "count_agreement.hpp"
#include "exec_support.hpp"
#include "program.hpp"

using namespace fast::exec;
using namespace exec_test;
using detail::call_kind;

namespace {

constexpr fast::agreement_kind kinds[] = {fast::agreement_kind::gather, fast::agreement_kind::servers};

// One rank's arguments to a call.
struct rank_call {
    call_kind kind = call_kind::alltoallv;
    std::uint64_t seq = 5;
    user_layout send, recv;
    std::string local_error;
};

// Every rank's call of matrix `m`; rank `gapped` (if any) with gaps in its layouts.
std::vector<rank_call> calls_of(const fast::traffic_matrix& m, int gapped = -1) {
    std::vector<rank_call> calls(static_cast<std::size_t>(m.rows()));
    for (int r = 0; r < m.rows(); ++r) {
        calls[static_cast<std::size_t>(r)].send =
            make_layout(row(m, r), r == gapped, 2 * static_cast<std::uint64_t>(r));
        calls[static_cast<std::size_t>(r)].recv =
            make_layout(column(m, r), r == gapped, 2 * static_cast<std::uint64_t>(r) + 1);
    }
    return calls;
}

// The agreement of one kind on one topology, every rank's side in this process.
class in_process {
public:
    in_process(fast::agreement_kind kind, const fast::topology& topo) : topo_(topo) {
        for (int r = 0; r < topo.ranks(); ++r) ranks_.push_back(detail::make_count_agreement(kind, topo, r));
    }

    [[nodiscard]] const detail::count_agreement& at(int r) const { return *ranks_[static_cast<std::size_t>(r)]; }

    // Runs one call; every rank's status. Ranks must end in the same round (errors are alike).
    std::vector<status> run(const std::vector<rank_call>& calls) {
        const auto ur = static_cast<std::size_t>(topo_.ranks());
        for (std::size_t r = 0; r < ur; ++r) {
            const rank_call& c = calls[r];
            const detail::call_args a{nullptr, c.send.counts, c.send.displs, nullptr, c.recv.counts, c.recv.displs};
            ranks_[r]->start(c.kind, c.seq, a, c.local_error);
        }
        std::vector<status> out(ur);
        for (int n = 0; n < ranks_[0]->rounds(); ++n) {
            for (std::size_t q = 0; q < ur; ++q) deliver(n, static_cast<int>(q));
            int failed = 0;
            for (std::size_t q = 0; q < ur; ++q)
                if (out[q] = ranks_[q]->received(n); !out[q].ok()) ++failed;
            REQUIRE((failed == 0 || failed == topo_.ranks()));
            if (failed > 0) break;
        }
        return out;
    }

private:
    // Round n's messages to rank q, from every member of its group.
    void deliver(int n, int q) {
        const detail::exchange_round mine = ranks_[static_cast<std::size_t>(q)]->round(n);
        for (int k = 0; k < mine.group.count; ++k) {
            const int p = mine.group.rank_at(k);
            const detail::exchange_round theirs = ranks_[static_cast<std::size_t>(p)]->round(n);
            const int at = theirs.group.index_of(q); // q's place in p's group: groups are symmetric
            REQUIRE(theirs.group.rank_at(at) == q);
            REQUIRE(theirs.kind == mine.kind);
            REQUIRE(theirs.bytes == mine.bytes);
            std::memcpy(mine.recv + static_cast<std::size_t>(k) * mine.bytes,
                        theirs.send + static_cast<std::size_t>(at) * theirs.send_stride, mine.bytes);
        }
    }

    fast::topology topo_;
    std::vector<std::unique_ptr<detail::count_agreement>> ranks_;
};

// The message every rank returned (the test fails unless they are the same).
std::string same_everywhere(const std::vector<status>& all) {
    for (const status& s : all) {
        CHECK(s.code() == all[0].code());
        CHECK(std::string(s.message()) == all[0].message());
    }
    return all[0].message();
}

fast::topology topo_of(int servers, int gpus) {
    fast::topology t;
    t.servers = servers;
    t.gpus_per_server = gpus;
    return t;
}

const fast::topology shapes[] = {topo_of(1, 1), topo_of(1, 3), topo_of(3, 1), topo_of(2, 2),
                                 topo_of(3, 2), topo_of(2, 3), topo_of(4, 2), topo_of(2, 4)};

} // namespace

// Whether every rank's blocks lie back to back in both its buffers.
bool all_contiguous(const std::vector<rank_call>& calls) {
    bool all = true;
    for (const rank_call& c : calls)
        all = all && detail::contiguous_layout(c.send.counts, c.send.displs, c.recv.counts, c.recv.displs) ==
                         (detail::send_contiguous | detail::recv_contiguous);
    return all;
}

TEST_CASE("both agreements give every rank the counts of the whole matrix, and the layout flag") {
    int scattered = 0; // calls with a rank's blocks out of order
    for (const fast::agreement_kind kind : kinds)
        for (const fast::topology& t : shapes) {
            INFO(fast::to_string(kind) << " on " << t.servers << " x " << t.gpus_per_server);
            in_process agreement(kind, t);
            for (std::uint64_t seed = 1; seed <= 3; ++seed) { // one object, call after call
                const fast::traffic_matrix m = random_skewed(t.ranks(), seed, 1000);
                const std::vector<rank_call> calls = calls_of(m, seed == 2 ? t.ranks() - 1 : -1);
                for (const status& s : agreement.run(calls)) REQUIRE(s.ok());
                const fast::shared_counts shared = fast::make_shared_counts(m, t);
                scattered += all_contiguous(calls) ? 0 : 1;
                for (int r = 0; r < t.ranks(); ++r) {
                    CHECK(agreement.at(r).shared() == shared);
                    CHECK(agreement.at(r).own() == fast::make_server_counts(m, t, t.server_of(r)));
                    CHECK(agreement.at(r).all_contiguous() == all_contiguous(calls));
                }
            }
        }
    CHECK(scattered >= 10);
}

TEST_CASE("mismatched counts: the first pair by receiver, then sender, and how many, alike on every rank") {
    // The example of the documentation: send[i][j] = 10 (i + 1) + j on three ranks.
    for (const fast::agreement_kind kind : kinds)
        for (const fast::topology& t : {topo_of(3, 1), topo_of(1, 3)}) {
            fast::traffic_matrix m(3, 3);
            for (int i = 0; i < 3; ++i)
                for (int j = 0; j < 3; ++j) m(i, j) = 10 * (i + 1) + j;
            std::vector<rank_call> calls = calls_of(m);
            calls[2].recv.counts[0] += 1;
            calls[1].recv.counts[2] += 1;
            const std::vector<status> all = in_process(kind, t).run(calls);
            CHECK(all[0].code() == errc::count_mismatch);
            CHECK(same_everywhere(all) ==
                  "alltoallv: rank 1 expects 32 bytes from rank 2, rank 2 sends 31 (and 1 more mismatched pair)");
        }
    // Random pairs on every shape, the expected message by brute force.
    for (const fast::agreement_kind kind : kinds)
        for (const fast::topology& t : shapes) {
            in_process agreement(kind, t);
            for (std::uint64_t seed = 1; seed <= 6; ++seed) {
                INFO(fast::to_string(kind) << " on " << t.servers << " x " << t.gpus_per_server << ", seed " << seed);
                const fast::traffic_matrix m = random_skewed(t.ranks(), seed, 500);
                std::vector<rank_call> calls = calls_of(m);
                std::uint64_t s = seed;
                for (std::uint64_t k = 0; k < seed % 4 + 1; ++k) {
                    std::size_t& c = calls[splitmix(s) % calls.size()].recv.counts[splitmix(s) % calls.size()];
                    c = c > 0 && splitmix(s) % 2 == 0 ? c - 1 : c + 3;
                }
                std::string first;
                int count = 0;
                for (int j = 0; j < t.ranks(); ++j)
                    for (int i = 0; i < t.ranks(); ++i) {
                        const auto expects =
                            calls[static_cast<std::size_t>(j)].recv.counts[static_cast<std::size_t>(i)];
                        if (static_cast<std::int64_t>(expects) != m(i, j) && count++ == 0)
                            first = "alltoallv: rank " + std::to_string(j) + " expects " + std::to_string(expects) +
                                    " bytes from rank " + std::to_string(i) + ", rank " + std::to_string(i) +
                                    " sends " + std::to_string(m(i, j));
                    }
                REQUIRE(count > 0);
                if (count > 1)
                    first += " (and " + std::to_string(count - 1) + " more mismatched pair" + (count > 2 ? "s)" : ")");
                CHECK(same_everywhere(agreement.run(calls)) == first);
            }
            // A correct call after the mismatches.
            const fast::traffic_matrix m = random_skewed(t.ranks(), 9, 500);
            for (const status& s : agreement.run(calls_of(m))) CHECK(s.ok());
            CHECK(agreement.at(0).shared() == fast::make_shared_counts(m, t));
        }
}

TEST_CASE("a rank's rejected arguments reach every rank with its text, the first in rank order") {
    for (const fast::agreement_kind kind : kinds)
        for (const fast::topology& t : {topo_of(2, 2), topo_of(4, 1), topo_of(1, 4)}) {
            INFO(fast::to_string(kind) << " on " << t.servers << " x " << t.gpus_per_server);
            std::vector<rank_call> calls = calls_of(random_skewed(4, 3, 100));
            for (rank_call& c : calls) c.kind = call_kind::alltoallv_init;
            calls[3].local_error = "rdispls[0] points past the end of the address space";
            calls[1].local_error = "sendcounts has 2 entries, expected 4 (one per rank)";
            calls[1].send.counts.resize(2); // never read: the rank sends zeros
            const std::vector<status> all = in_process(kind, t).run(calls);
            CHECK(all[0].code() == errc::invalid_argument);
            CHECK(same_everywhere(all) ==
                  "alltoallv_init: rank 1: sendcounts has 2 entries, expected 4 (one per rank) (and 1 more rank)");
        }
}

TEST_CASE("ranks in different calls: the first rank in another call than rank 0's, alike on every rank") {
    for (const fast::agreement_kind kind : kinds)
        for (const fast::topology& t : {topo_of(2, 2), topo_of(4, 1), topo_of(1, 4)}) {
            INFO(fast::to_string(kind) << " on " << t.servers << " x " << t.gpus_per_server);
            in_process agreement(kind, t);
            std::vector<rank_call> calls = calls_of(random_skewed(4, 4, 100));
            calls[2].seq = 6;
            calls[3].kind = call_kind::alltoallv_init;
            calls[1].local_error = "overlap"; // a different call comes first
            std::vector<status> all = agreement.run(calls);
            CHECK(all[0].code() == errc::invalid_argument);
            CHECK(same_everywhere(all) == "alltoallv: ranks are in different collective calls: rank 0 in call 5 "
                                          "(alltoallv), rank 2 in call 6 (alltoallv); every rank must make the same "
                                          "calls in the same order");
            calls = calls_of(random_skewed(4, 4, 100));
            calls[0].kind = call_kind::alltoallv_init; // rank 0's call starts every rank's message
            CHECK_THAT(same_everywhere(agreement.run(calls)),
                       Catch::StartsWith("alltoallv_init: ranks are in different collective calls: rank 0 in call 5 "
                                         "(alltoallv_init), rank 1 in call 5 (alltoallv);"));
        }
}

TEST_CASE("sums beyond int64 within a server cannot be planned: the same status on every rank") {
    // Rank 0 sends 2^62 to rank 2, rank 1 as much to rank 3: each count, and each rank's total,
    // is valid; what server 0 sends server 1 is 2^63.
    fast::traffic_matrix m = fast::traffic_matrix::Zero(4, 4);
    m(0, 2) = m(1, 3) = std::int64_t{1} << 62;
    for (const fast::agreement_kind kind : kinds) {
        const std::vector<status> all = in_process(kind, topo_of(2, 2)).run(calls_of(m));
        CHECK(all[0].code() == errc::invalid_argument);
        CHECK(same_everywhere(all) == "the traffic cannot be planned: the bytes of server 0 overflow int64");
    }
}

TEST_CASE("the bytes one rank receives, from the executor's own rounds, are fast::agreement_of's") {
    for (const int servers : {4, 32, 128}) {
        const fast::topology t = topo_of(servers, 8);
        for (const fast::agreement_kind kind : kinds) {
            const fast::agreement model = fast::agreement_of(t, kind);
            for (const int rank : {0, 13, t.ranks() - 1}) {
                std::unique_ptr<detail::count_agreement> a = detail::make_count_agreement(kind, t, rank);
                const detail::received_bytes got = detail::bytes_received(*a, t, rank);
                INFO(fast::to_string(kind) << " at " << t.ranks() << " ranks, rank " << rank);
                CHECK(a->rounds() == model.rounds);
                CHECK(got.network == model.network_bytes);
                CHECK(got.local == model.local_bytes);
            }
            if (kind == fast::agreement_kind::servers && t.ranks() == 1024) CHECK(model.network_bytes <= 256 * 1024);
        }
    }
}
