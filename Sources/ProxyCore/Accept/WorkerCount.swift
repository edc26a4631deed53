import Foundation

/// How many workers: `proxy.workers`, else one per online core (at most 64). In debug builds
/// `PINPROXY_TEST_WORKERS=N` replaces that default (not a count the file names), so the end-to-end
/// suites run with 1 or N workers without new policy files (like `PINPROXY_TEST_RELAY`), and a test
/// that needs two workers says so in its policy.
enum WorkerCount {
    static let maximum = 64

    static func resolve(_ configured: Int?) -> Int {
        if let configured { return configured }
        if let testOverride { return testOverride }
        return min(max(ProcessInfo.processInfo.activeProcessorCount, 1), maximum)
    }

    static let testOverride: Int? = {
        #if DEBUG
        return ProcessInfo.processInfo.environment["PINPROXY_TEST_WORKERS"].flatMap(Int.init).flatMap { (1...maximum).contains($0) ? $0 : nil }
        #else
        return nil
        #endif
    }()
}
