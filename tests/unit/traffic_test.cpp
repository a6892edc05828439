#include <catch2/catch.hpp>

#include <fast/traffic.hpp>

#include <limits>

using namespace fast;

TEST_CASE("validation names the bad index and value") {
    const topology t = make_topology(2, 2);
    traffic_matrix m = traffic_matrix::Zero(4, 4);
    CHECK_NOTHROW(validate_traffic(m, t));
    CHECK_THROWS_WITH(validate_traffic(traffic_matrix::Zero(3, 4), t),
                      Catch::Contains("3 x 4 but the topology has 2 x 2 = 4 ranks"));
    m(1, 2) = -5;
    CHECK_THROWS_WITH(validate_traffic(m, t), Catch::Contains("traffic(1, 2) = -5 is negative"));
    m(1, 2) = std::numeric_limits<std::int64_t>::max();
    m(3, 0) = 1;
    CHECK_THROWS_WITH(validate_traffic(m, t), Catch::Contains("overflows"));
}

TEST_CASE("the branch-free validation pass agrees with the entry-by-entry one at the limits") {
    const topology t = make_topology(2, 2);
    constexpr std::int64_t top = std::numeric_limits<std::int64_t>::max();
    traffic_matrix m = traffic_matrix::Zero(4, 4);
    // A total of exactly INT64_MAX fits, split so that both 32-bit halves carry.
    m(0, 1) = top - (std::int64_t{0xffffffff} * 3);
    m(1, 0) = m(2, 3) = m(3, 2) = 0xffffffff;
    CHECK(detail::all_bytes_fit(m.data(), 16));
    CHECK_NOTHROW(validate_traffic(m, t));
    m(3, 3) = 1; // one byte more
    CHECK_FALSE(detail::all_bytes_fit(m.data(), 16));
    CHECK_THROWS_WITH(validate_traffic(m, t), Catch::Contains("overflows"));
    m = traffic_matrix::Zero(4, 4);
    m(2, 1) = std::numeric_limits<std::int64_t>::min();
    CHECK_FALSE(detail::all_bytes_fit(m.data(), 16));
    CHECK_THROWS_WITH(validate_traffic(m, t), Catch::Contains("traffic(2, 1) = -9223372036854775808 is negative"));
}

TEST_CASE("floating matrices must hold finite whole byte counts") {
    const topology t = make_topology(1, 2);
    Eigen::MatrixXd d(2, 2);
    d << 0, 1.0, 2.0, 3.0;
    const traffic_matrix m = make_traffic(d, t);
    CHECK(m(1, 1) == 3);
    d(0, 1) = 0.5;
    CHECK_THROWS_WITH(make_traffic(d, t), Catch::Contains("traffic(0, 1) = 0.5 is not a whole number"));
    d(0, 1) = std::numeric_limits<double>::quiet_NaN();
    CHECK_THROWS_WITH(make_traffic(d, t), Catch::Contains("traffic(0, 1) is not finite"));
    d(0, 1) = 1e30;
    CHECK_THROWS_WITH(make_traffic(d, t), Catch::Contains("does not fit"));
    Eigen::Matrix<std::uint64_t, 2, 2> u;
    u << 0, 1, 2, std::numeric_limits<std::uint64_t>::max();
    CHECK_THROWS_WITH(make_traffic(u, t), Catch::Contains("traffic(1, 1)"));
}

TEST_CASE("tiles, totals and server aggregates") {
    const topology t = make_topology(2, 2);
    traffic_matrix m(4, 4);
    m << 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16;
    const traffic_matrix t01 = tile(m, t, 0, 1);
    CHECK(t01(0, 0) == 3);
    CHECK(t01(1, 1) == 8);
    CHECK(send_totals(m) == std::vector<std::int64_t>{10, 26, 42, 58});
    CHECK(recv_totals(m) == std::vector<std::int64_t>{28, 32, 36, 40});
    CHECK(busiest_rank(m) == 3); // 58 + 40
    traffic_matrix hot_receiver = traffic_matrix::Zero(4, 4);
    hot_receiver(0, 1) = 5;
    hot_receiver(2, 1) = 5;
    hot_receiver(3, 2) = 4;
    CHECK(busiest_rank(hot_receiver) == 1); // receives 10; rank 2 moves 5 + 4
    const traffic_matrix sm = server_matrix(m, t);
    CHECK(sm(0, 0) == 14);
    CHECK(sm(0, 1) == 22);
    CHECK(sm(1, 0) == 46);
    CHECK(sm(1, 1) == 54);
    const server_load load = inter_server_load(m, t);
    CHECK(load.send == std::vector<std::int64_t>{22, 46});
    CHECK(load.recv == std::vector<std::int64_t>{46, 22});
    CHECK(total_bytes(m) == 136);
}
