// job.cpp: job.c in C++, with RAII wrappers: every handle and string is freed (and the job
// released) on every path out, exceptions included.
//
//   job_cpp                      launches the bundled demo job (4 ranks; no MPI needed)
//   job_cpp STARTER [ARGS...]    launches STARTER ARGS... instead
//
// Build: c++ -std=c++17 -o job_cpp job.cpp $(pkg-config --cflags --libs mpir)
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "mpir.h"

namespace mpir {

// A failed call: its status and the library's message.
struct Error : std::runtime_error {
    mpir_status status;
    Error(const std::string &what, mpir_status s)
        : std::runtime_error(what + ": " + mpir_status_name(s) + ": " + mpir_last_error()),
          status(s) {}
};

inline void check(const char *what, mpir_status s) {
    if (s != MPIR_STATUS_OK) throw Error(what, s);
}

// A string the library returned, freed with mpir_string_free.
struct StringFree {
    void operator()(char *s) const { mpir_string_free(s); }
};
using String = std::unique_ptr<char, StringFree>;

class Options {
  public:
    Options() { check("mpir_options_new", mpir_options_new(&h_)); }
    ~Options() { mpir_options_free(h_); }
    Options(const Options &) = delete;
    Options &operator=(const Options &) = delete;
    Options &timeout_ms(uint64_t ms) {
        check("mpir_options_set_timeout_ms", mpir_options_set_timeout_ms(h_, ms));
        return *this;
    }
    const mpir_options *get() const { return h_; }

  private:
    mpir_options *h_ = nullptr;
};

class Session {
  public:
    static Session launch(const std::vector<std::string> &argv, const Options &opts) {
        std::vector<const char *> c;
        for (const auto &a : argv) c.push_back(a.c_str());
        mpir_session *h = nullptr;
        check("mpir_session_launch", mpir_session_launch(c.data(), c.size(), opts.get(), &h));
        return Session(h);
    }
    ~Session() { mpir_session_free(h_); }  // releases too
    Session(Session &&o) noexcept : h_(o.h_) { o.h_ = nullptr; }
    Session(const Session &) = delete;
    Session &operator=(const Session &) = delete;
    Session &operator=(Session &&) = delete;

    std::vector<mpir_rank> ranks() const {
        size_t n = 0;
        check("mpir_session_rank_count", mpir_session_rank_count(h_, &n));
        std::vector<mpir_rank> out(n);
        for (size_t i = 0; i < n; i++) check("mpir_session_rank", mpir_session_rank(h_, i, &out[i]));
        return out;
    }
    std::string deadlock_json(uint32_t samples, uint32_t interval_ms) {
        char *s = nullptr;
        check("mpir_session_deadlock_json",
              mpir_session_deadlock_json(h_, samples, interval_ms, &s));
        return String(s).get();
    }
    void release() { check("mpir_session_release", mpir_session_release(h_)); }

  private:
    explicit Session(mpir_session *h) : h_(h) {}
    mpir_session *h_;
};

inline std::string demo_starter() {
    char *p = nullptr;
    check("mpir_demo_starter", mpir_demo_starter(&p));
    return String(p).get();
}

}  // namespace mpir

int main(int argc, char **argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    std::cout << std::unitbuf;
    try {
        std::cout << "libmpir " << mpir_version() << "\n";
        std::vector<std::string> command(argv + 1, argv + argc);
        if (command.empty()) command = {mpir::demo_starter(), "-n", "4"};
        mpir::Options opts;
        opts.timeout_ms(30000);
        auto session = mpir::Session::launch(command, opts);
        auto ranks = session.ranks();
        std::cout << ranks.size() << " ranks\n";
        for (const auto &r : ranks) {
            std::cout << "rank " << r.rank << " pid " << r.pid << " host " << (r.host ? r.host : "?")
                      << " local " << (r.local == 1 ? "yes" : r.local == 0 ? "no" : "unknown")
                      << " executable " << (r.executable ? r.executable : "?") << " control "
                      << r.control << "\n";
        }
        std::string verdict;
        for (int attempt = 0; attempt < 20; attempt++) {
            verdict = session.deadlock_json(3, 100);
            if (verdict.find("\"verdict\":\"deadlock\"") != std::string::npos) break;
            verdict.clear();
            std::this_thread::sleep_for(std::chrono::seconds(1));
        }
        std::cout << "deadlock " << (verdict.empty() ? "not confirmed" : verdict) << "\n";
        session.release();
        std::cout << "released\n";
        return verdict.empty() ? 2 : 0;
    } catch (const mpir::Error &e) {
        std::cerr << "job_cpp: " << e.what() << "\n";
        return 1;
    }
}
