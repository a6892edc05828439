// Prints a hash of every plan of a wide sweep, so that a change meant to leave plans alone (a
// refactoring, a speed-up) can be checked byte for byte: run it before and after and compare
// the output (cmp). One line per matrix and option set: the whole plan (planner::make), every
// rank's program (planner::make_rank for each rank, hashed in rank order), the schedule alone
// (planner::make_schedule) and what the automatic scheduler chose; per matrix also balance()
// and decompose() of its server matrix.
//
//   plan_sweep [--megatron PATH] [--only TEXT] [--part K/N] [--verify]
//
// The sweep: 1 to 8, 16 and 32 servers of 1, 3 or 8 GPUs; zipf:0.8, moe, uniform and seeded
// random matrices (sparse, log-uniform sizes; tiny ones the automatic scheduler sends direct);
// every scheduler and policy, blocks split or not, and option variants (window, ramp, quantum,
// step share, chunks, stage order) on up to 8 servers. --megatron adds every matrix of the
// file (4 x 8, 8 KiB per token) under the main option sets. --only keeps the lines whose matrix
// name contains TEXT; --part K/N runs every N-th matrix from the K-th (0-based), for running
// shards side by side; --verify puts every whole plan through the verifier (exit 1 if one
// fails).
#include "../tests/determinism/plan_digest.hpp"

#include <fast/fast.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using fast::test::add_transfer;
using fast::test::fnv;

// The whole plan (plan_digest.hpp) and the scheduler it names.
std::uint64_t hash_plan(const fast::plan& p) {
    fnv f;
    fast::test::add_plan(f, p);
    for (const char c : p.scheduler) f.add(static_cast<unsigned char>(c));
    return f.h;
}

void add_program(fnv& f, const fast::rank_program& p) {
    f.add(static_cast<std::uint64_t>(p.rank));
    f.add(p.steps);
    f.add_signed(p.scratch_bytes);
    f.add(p.one_to_one_scale_out ? 1 : 0);
    f.add(p.transfers.size());
    for (const fast::rank_transfer& x : p.transfers) {
        add_transfer(f, x.transfer);
        f.add((static_cast<std::uint64_t>(x.step) << 32) | x.pair_index);
    }
}

struct named_options {
    std::string name;
    fast::plan_options options;
};

fast::plan_options with(fast::scheduler s, fast::policy p = fast::policy::rail_packed) {
    fast::plan_options o;
    o.scheduler = s;
    o.policy = p;
    return o;
}

// The main option sets: every scheduler, every policy (the exact one with each stage order).
std::vector<named_options> main_sets() {
    std::vector<named_options> out;
    for (const fast::scheduler s : {fast::scheduler::fast, fast::scheduler::automatic})
        for (const fast::policy p : {fast::policy::rail_packed, fast::policy::bottleneck, fast::policy::exact})
            out.push_back({std::string(fast::to_string(s)) + "/" + std::string(fast::to_string(p)), with(s, p)});
    for (const fast::stage_order order : {fast::stage_order::ascending, fast::stage_order::descending}) {
        fast::plan_options o = with(fast::scheduler::fast, fast::policy::exact);
        o.order = order;
        out.push_back({order == fast::stage_order::ascending ? "fast/exact-ascending" : "fast/exact-descending", o});
    }
    for (const fast::scheduler s :
         {fast::scheduler::direct, fast::scheduler::spreadout, fast::scheduler::fast_unbalanced})
        out.push_back({std::string(fast::to_string(s)), with(s)});
    return out;
}

// Variants of the tuned options, on small clusters.
std::vector<named_options> variant_sets() {
    std::vector<named_options> out;
    auto add = [&](const std::string& name, fast::policy p, auto change) {
        fast::plan_options o = with(fast::scheduler::fast, p);
        change(o);
        out.push_back({name, o});
    };
    add("rail-packed/window1", fast::policy::rail_packed, [](fast::plan_options& o) { o.window = 1; });
    add("rail-packed/window4", fast::policy::rail_packed, [](fast::plan_options& o) { o.window = 4; });
    add("rail-packed/ramp0", fast::policy::rail_packed, [](fast::plan_options& o) { o.ramp = 0; });
    add("rail-packed/ramp2", fast::policy::rail_packed, [](fast::plan_options& o) { o.ramp = 2; });
    add("rail-packed/quantum64k", fast::policy::rail_packed, [](fast::plan_options& o) { o.quantum = 65536; });
    add("rail-packed/choices1", fast::policy::rail_packed, [](fast::plan_options& o) {
        o.quantum_choices = 1;
        o.quantum_refinements = 0;
    });
    add("rail-packed/refine-max2", fast::policy::rail_packed, [](fast::plan_options& o) { o.refine_max_servers = 2; });
    add("rail-packed/share0.25", fast::policy::rail_packed, [](fast::plan_options& o) { o.max_step_share = 0.25; });
    add("rail-packed/min-step0", fast::policy::rail_packed, [](fast::plan_options& o) { o.min_step_alphas = 0; });
    add("rail-packed/long-scale2", fast::policy::rail_packed,
        [](fast::plan_options& o) { o.long_call_ramp_scale = 2; });
    add("bottleneck/window3", fast::policy::bottleneck, [](fast::plan_options& o) { o.window = 3; });
    add("bottleneck/fraction0.5", fast::policy::bottleneck, [](fast::plan_options& o) { o.quantum_fraction = 0.5; });
    add("exact/chunks3", fast::policy::exact, [](fast::plan_options& o) { o.chunks = 3; });
    return out;
}

struct config {
    std::string megatron;
    std::string only;
    int part = 0;
    int parts = 1;
    bool verify = false;
};

// Whether make_rank builds the whole plan and restricts it (planner::make_rank).
bool restricts_whole(const fast::plan_options& o) {
    return o.scheduler == fast::scheduler::spreadout || o.scheduler == fast::scheduler::fast_unbalanced ||
           (o.scheduler != fast::scheduler::direct && o.policy == fast::policy::exact &&
            o.order == fast::stage_order::automatic);
}

// Every rank's program, hashed in rank order. Where make_rank restricts the whole plan, on more
// than 8 servers only every 37th rank and the last (each costs a whole plan, up to three with
// the exact policy's automatic order).
std::uint64_t hash_ranks(fast::planner& p, const fast::traffic_matrix& m) {
    fnv f;
    const int ranks = p.topology().ranks();
    const int stride = restricts_whole(p.options()) && p.topology().servers > 8 ? 37 : 1;
    for (int r = 0; r < ranks; r += stride) add_program(f, p.make_rank(m, r));
    if (stride > 1 && (ranks - 1) % stride != 0) add_program(f, p.make_rank(m, ranks - 1));
    return f.h;
}

std::uint64_t hash_schedule(fast::planner& p, const fast::traffic_matrix& m) {
    fnv f;
    const auto steps = p.make_schedule(m);
    f.add(steps.size());
    for (const std::int64_t n : steps) f.add_signed(n);
    return f.h;
}

// One line per option set (blocks whole and split) for matrix `m`.
void sweep_options(const config& c, const std::string& what, const fast::traffic_matrix& m, const fast::topology& t,
                   const std::vector<named_options>& sets) {
    for (const named_options& set : sets)
        for (const bool split : {false, true}) {
            fast::plan_options o = set.options;
            o.split_blocks = split;
            const auto started = std::chrono::steady_clock::now();
            fast::planner p(t, o);
            const fast::plan& whole = p.make(m);
            if (c.verify)
                if (const auto v = fast::verify(whole, m); !v.ok())
                    throw std::runtime_error(what + " " + set.name + ": plan does not verify: " + v.message());
            const std::uint64_t whole_hash = hash_plan(whole);
            const std::size_t steps = whole.steps();
            const std::size_t transfers = whole.transfers.size();
            const fast::scheduler chosen = p.last_scheduler();
            const std::uint64_t ranks = hash_ranks(p, m);
            const bool scheduled = o.scheduler == fast::scheduler::fast || o.scheduler == fast::scheduler::automatic;
            const std::uint64_t schedule = scheduled ? hash_schedule(p, m) : 0;
            std::printf("%s %s%s: %zu steps %zu transfers %s whole %016llx ranks %016llx schedule %016llx\n",
                        what.c_str(), set.name.c_str(), split ? "/split" : "", steps, transfers,
                        std::string(fast::to_string(chosen)).c_str(), static_cast<unsigned long long>(whole_hash),
                        static_cast<unsigned long long>(ranks), static_cast<unsigned long long>(schedule));
            if (std::getenv("PLAN_SWEEP_TIMES") != nullptr)
                std::fprintf(stderr, "%s %s: %.3f s\n", what.c_str(), set.name.c_str(),
                             std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
        }
}

// balance() and decompose() of the matrix's server matrix, the public entry points of stages
// the planner uses.
void sweep_stages(const std::string& what, const fast::traffic_matrix& m, const fast::topology& t) {
    const fast::balanced_traffic b = fast::balance(m, t);
    fnv f;
    for (Eigen::Index i = 0; i < b.server_matrix.size(); ++i) f.add_signed(b.server_matrix.data()[i]);
    for (const std::size_t o : b.offsets) f.add(o);
    for (const fast::piece& x : b.pieces) {
        f.add_signed(x.offset);
        f.add_signed(x.bytes);
        f.add((static_cast<std::uint64_t>(static_cast<std::uint32_t>(x.origin)) << 32) |
              static_cast<std::uint32_t>(x.final));
    }
    const fast::traffic_matrix regular = fast::pad_to_regular(b.server_matrix);
    for (Eigen::Index i = 0; i < regular.size(); ++i) f.add_signed(regular.data()[i]);
    for (const fast::matching_rule rule : {fast::matching_rule::any, fast::matching_rule::bottleneck}) {
        const fast::decomposition d = fast::decompose(regular, rule);
        for (const std::int32_t x : d.perms) f.add(static_cast<std::uint32_t>(x));
        for (const std::int64_t w : d.weights) f.add_signed(w);
    }
    std::printf("%s stages: balance, pad, decompose %016llx\n", what.c_str(), static_cast<unsigned long long>(f.h));
}

// A seeded random matrix: about half the off-diagonal entries non-zero, sizes log-uniform from
// 1 byte to 2^max_log2 bytes.
fast::traffic_matrix make_random(const fast::topology& t, int max_log2, std::uint64_t seed) {
    std::mt19937_64 gen(seed);
    const int r = t.ranks();
    fast::traffic_matrix m = fast::traffic_matrix::Zero(r, r);
    for (int i = 0; i < r; ++i)
        for (int j = 0; j < r; ++j) {
            const std::uint64_t x = gen();
            if (i == j || (x & 1) == 0) continue;
            const int bits = static_cast<int>((x >> 1) % static_cast<std::uint64_t>(max_log2 + 1));
            m(i, j) = 1 + static_cast<std::int64_t>((x >> 8) & ((std::uint64_t{1} << bits) - 1));
        }
    return m;
}

bool wanted(const config& c, const std::string& what, std::size_t& index) {
    const std::size_t k = index++;
    if (static_cast<int>(k % static_cast<std::size_t>(c.parts)) != c.part) return false;
    return c.only.empty() || what.find(c.only) != std::string::npos;
}

void sweep(const config& c) {
    const std::vector<named_options> main = main_sets();
    const std::vector<named_options> variants = variant_sets();
    std::size_t index = 0;
    for (const int g : {1, 3, 8})
        for (const int servers : {1, 2, 3, 4, 5, 6, 7, 8, 16, 32}) {
            const fast::topology t = fast::make_topology(servers, g);
            const std::string size = std::to_string(servers) + "x" + std::to_string(g);
            fast::moe_options moe;
            moe.top_k = std::min(moe.top_k, t.ranks());
            moe.tokens_per_gpu = 1024;
            const std::vector<std::pair<std::string, fast::traffic_matrix>> cases = {
                {"zipf " + size, fast::make_zipf(t, 0.8, std::int64_t{64} << 20, 1)},
                {"moe " + size, fast::make_moe(t, moe, std::int64_t{16} << 20, 2)},
                {"uniform " + size, fast::make_uniform(t, std::int64_t{1} << 20)},
                {"random " + size, make_random(t, 24, 3)},
                {"tiny " + size, make_random(t, 10, 4)},
            };
            for (const auto& [what, m] : cases) {
                if (!wanted(c, what, index)) continue;
                sweep_stages(what, m, t);
                sweep_options(c, what, m, t, main);
                if (servers <= 8) sweep_options(c, what, m, t, variants);
            }
        }
    if (!c.megatron.empty()) {
        const std::vector<fast::traffic_matrix> all = fast::read_matrices_file(c.megatron, 32, 8192);
        const fast::topology t = fast::make_topology(4, 8);
        for (std::size_t k = 0; k < all.size(); ++k) {
            const std::string what = "megatron " + std::to_string(k);
            if (!wanted(c, what, index)) continue;
            sweep_stages(what, all[k], t);
            sweep_options(c, what, all[k], t, main);
        }
    }
}

int parse_int(const std::string& text, const char* what) {
    int v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc{} || end != text.data() + text.size() || v < 0)
        throw std::invalid_argument(std::string(what) + " must be a non-negative integer, got '" + text + "'");
    return v;
}

config parse(int argc, char** argv) {
    config c;
    for (int k = 1; k < argc; ++k) {
        const std::string arg = argv[k];
        auto value = [&]() -> std::string {
            if (k + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
            return argv[++k];
        };
        if (arg == "--megatron") {
            c.megatron = value();
        } else if (arg == "--only") {
            c.only = value();
        } else if (arg == "--part") {
            const std::string v = value();
            const auto slash = v.find('/');
            if (slash == std::string::npos) throw std::invalid_argument("--part takes K/N, got '" + v + "'");
            c.part = parse_int(v.substr(0, slash), "--part K");
            c.parts = parse_int(v.substr(slash + 1), "--part N");
            if (c.parts < 1 || c.part >= c.parts)
                throw std::invalid_argument("--part K/N needs 0 <= K < N, got '" + v + "'");
        } else if (arg == "--verify") {
            c.verify = true;
        } else if (arg == "-h" || arg == "--help") {
            std::printf("usage: plan_sweep [--megatron PATH] [--only TEXT] [--part K/N] [--verify]\n"
                        "Prints a hash of every whole plan, every rank's program and every schedule of a sweep\n"
                        "(see benchmarks/plan_sweep.cpp); compare the output of two builds with cmp.\n");
            std::exit(0);
        } else {
            throw std::invalid_argument("unknown argument '" + arg + "' (see --help)");
        }
    }
    return c;
}

} // namespace

int main(int argc, char** argv) {
    try {
        sweep(parse(argc, argv));
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "plan_sweep: error: %s\n", e.what());
        return 1;
    }
}
