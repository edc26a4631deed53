// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "pinproxy",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "pinproxy", targets: ["pinproxy"])
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", exact: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", exact: "1.16.2"),
        .package(url: "https://github.com/jpsim/Yams", exact: "6.2.2"),
        // ML-KEM for the mirror check's post-quantum key shares (OpenSSL 3.0 has none).
        .package(url: "https://github.com/apple/swift-crypto", exact: "4.5.2"),
    ],
    targets: [
        // System libraries: one libevent module, explicit links, no duplicate libevent.so.
        .systemLibrary(name: "CLibevent", pkgConfig: "libevent_core", providers: [.apt(["libevent-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        // RFC 8879 certificate decompression (zlib, brotli, zstd decoders), for TLSInspection alone.
        .systemLibrary(
            name: "CCompression", path: "Sources/CCompression", providers: [.apt(["zlib1g-dev", "libbrotli-dev", "libzstd-dev"])]),
        // Only macros and variadics that Swift cannot import; no logic.
        .target(name: "CShims", dependencies: ["COpenSSL", "CLibevent"]),

        // Pure policy: no sockets, no OpenSSL.
        // glibc's <sys/statfs.h>: is the key log on tmpfs (a header only, no sockets, no OpenSSL).
        .systemLibrary(name: "CStatfs", path: "Sources/CStatfs"),
        .target(name: "PinPolicy", dependencies: ["CStatfs", .product(name: "Yams", package: "Yams")]),
        // Certificate facts and chain validation through OpenSSL; fills PinPolicy's value types.
        // swift-crypto only for ML-KEM (the mirror's X25519MLKEM768 and kin); classical keys stay on OpenSSL.
        .target(
            name: "TLSInspection",
            dependencies: ["COpenSSL", "CCompression", "CShims", "PinPolicy", .product(name: "Crypto", package: "swift-crypto")]),
        // The libevent proxy.
        .target(
            name: "ProxyCore",
            dependencies: [
                "CLibevent", "CShims", "TLSInspection", "PinPolicy",
                .product(name: "Logging", package: "swift-log"),
            ]),
        .executableTarget(
            name: "pinproxy",
            dependencies: [
                "ProxyCore", "TLSInspection", "PinPolicy",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]),

        // The log lines' cost in a release build (Benchmarks/logcost.sh); reaches ProxyCore's records through @_spi(Benchmarks).
        .executableTarget(
            name: "pinproxy-logcost", dependencies: ["ProxyCore", "PinPolicy", .product(name: "Logging", package: "swift-log")],
            path: "Benchmarks/LogCost"),

        // The mirror's ML-KEM shares' cost in a release build (Benchmarks/mlkemcost.sh); reaches TLSInspection's keys through @_spi(Benchmarks).
        .executableTarget(
            name: "pinproxy-mlkemcost", dependencies: ["TLSInspection", .product(name: "Crypto", package: "swift-crypto")],
            path: "Benchmarks/MLKEMCost"),

        // One CONNECT's rule lookup with many rules in a release build (Benchmarks/manyrules.sh).
        .executableTarget(name: "pinproxy-rulelookup", dependencies: ["PinPolicy"], path: "Benchmarks/RuleLookup"),

        // glibc's <malloc.h> for tests that measure the heap (mallinfo2); Swift's Glibc module lacks it.
        .systemLibrary(name: "CMalloc", path: "Tests/CMalloc"),
        .testTarget(name: "PinPolicyTests", dependencies: ["PinPolicy", "CMalloc"]),
        // zlib, brotli and zstd encoders for tests that build CompressedCertificate messages.
        .systemLibrary(name: "CCompressionEncoders", path: "Tests/CCompressionEncoders"),
        .testTarget(
            name: "TLSInspectionTests",
            // Crypto: the ML-KEM tests play the server's side (encapsulation, their own curve keys).
            dependencies: ["TLSInspection", "PinPolicy", "TestSupport", "CCompressionEncoders", .product(name: "Crypto", package: "swift-crypto")],
            exclude: ["Fixtures"]),
        // Process, fixture and upstream helpers for the tests that run pinproxy as a process.
        .target(name: "TestSupport", dependencies: ["PinPolicy", "ProxyCore"], path: "Tests/TestSupport", exclude: ["scripts"]),
        .testTarget(name: "CLITests", dependencies: ["pinproxy", "PinPolicy", "TestSupport"]),
        .testTarget(name: "ProxyCoreTests", dependencies: ["ProxyCore", "PinPolicy", "TLSInspection", "TestSupport"]),
        .testTarget(name: "EndToEndTests", dependencies: ["pinproxy", "PinPolicy", "TestSupport"]),
    ]
)
