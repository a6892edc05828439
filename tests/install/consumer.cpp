// Built against the installed headers only (pkg-config fast): plans and verifies a baseline.
#include <fast/fast.hpp>

#include <cstdio>

int main() {
    const fast::topology t = fast::make_topology(2, 4);
    const fast::traffic_matrix m = fast::make_zipf(t, 0.8, 1 << 20, 7);
    const fast::plan p = fast::make_plan(m, t);
    const fast::verification v = fast::verify(p, m);
    std::printf("%s: %zu steps, %.1f us\n", v.message().c_str(), p.steps(), fast::predict_us(p));
    return v.ok() ? 0 : 1;
}
