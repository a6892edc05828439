#include "../support.hpp"

#include <fast/baselines.hpp>

using namespace fast;

TEST_CASE("direct and spreadout verify on 1000 seeded matrices of every shape") {
    for (std::uint64_t seed = 0; seed < 1000; ++seed) {
        const auto c = fast::test::make_random_case(seed);
        INFO("seed " << seed << ", shape " << c.shape);
        const plan d = make_direct_plan(c.matrix, c.topo);
        fast::test::check_plan(d, c.matrix);
        CHECK(d.steps() <= 1);
        const plan s = make_spreadout_plan(c.matrix, c.topo);
        const verification v = fast::test::check_plan(s, c.matrix);
        CHECK(v.one_to_one_scale_out);
        CHECK(s.steps() <= static_cast<std::size_t>(c.topo.ranks()));
        // Sending everything at once never loses to R rounds in a model without incast.
        CHECK(predict_us(d) <= predict_us(s) + 1e-9);
        CHECK(predict_us(d) + 1e-6 >= lower_bound_us(c.matrix, c.topo) - 1e-6);
    }
}
