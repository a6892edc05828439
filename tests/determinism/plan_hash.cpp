// Prints one line per plan: what was planned and an FNV-1a hash of the whole plan (scratch,
// steps, every field of every transfer). Ranks plan independently, so the same matrix must give
// a byte-identical plan in every process and in every build (g++ and clang).
#include "plan_digest.hpp"

#include <fast/fast.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

using fast::test::hash_plan;

void emit(const std::string& what, const fast::traffic_matrix& m, const fast::topology& t) {
    for (const fast::policy policy : {fast::policy::rail_packed, fast::policy::bottleneck, fast::policy::exact}) {
        fast::plan_options o;
        o.policy = policy;
        const fast::plan p = fast::make_plan(m, t, o);
        if (!fast::verify(p, m).ok()) {
            std::printf("%s %s: plan does not verify\n", what.c_str(), std::string(fast::to_string(policy)).c_str());
            std::exit(1);
        }
        std::printf("%s fast/%s %zu steps %zu transfers %016llx\n", what.c_str(),
                    std::string(fast::to_string(policy)).c_str(), p.steps(), p.transfers.size(),
                    static_cast<unsigned long long>(hash_plan(p)));
    }
    for (const fast::scheduler s :
         {fast::scheduler::fast_unbalanced, fast::scheduler::direct, fast::scheduler::spreadout}) {
        fast::plan_options o;
        o.scheduler = s;
        const fast::plan p = fast::make_plan(m, t, o);
        std::printf("%s %s %zu steps %016llx\n", what.c_str(), std::string(fast::to_string(s)).c_str(), p.steps(),
                    static_cast<unsigned long long>(hash_plan(p)));
    }
}

} // namespace

int main() {
    for (const int servers : {2, 4, 8, 16}) {
        const fast::topology t = fast::make_topology(servers, 8);
        for (const std::uint64_t seed : {1, 2}) {
            emit("zipf " + std::to_string(servers) + "x8 seed " + std::to_string(seed),
                 fast::make_zipf(t, 0.8, std::int64_t{256} << 20, seed), t);
            emit("moe " + std::to_string(servers) + "x8 seed " + std::to_string(seed),
                 fast::make_moe(t, fast::moe_options{}, std::int64_t{64} << 20, seed), t);
        }
    }
    const fast::topology mi = fast::make_topology(4, 8, fast::preset::mi300x);
    emit("uniform 4x8 mi300x", fast::make_uniform(mi, std::int64_t{1} << 30), mi);
    if (const char* path = std::getenv("FAST_MEGATRON"); path != nullptr) { // set by meson: workloads/
        const auto all = fast::read_matrices_file(path, 32, 8192);
        const fast::topology t = fast::make_topology(4, 8);
        for (std::size_t k = 0; k < all.size(); k += 37) emit("megatron " + std::to_string(k), all[k], t);
    }
    return 0;
}
