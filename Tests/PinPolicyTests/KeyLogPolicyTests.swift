import Foundation
import Testing
@testable import PinPolicy

/// `proxy.keylog` and `require_keylog`: strict like the rest of the file, and a key log that could
/// reach a disk is refused before pinproxy starts.
@Suite struct KeyLogPolicyTests {
    /// /dev/shm is tmpfs on Linux; the repository is not.
    static let memoryDirectory = "/dev/shm"
    static let diskDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().path

    static func policy(keylog: String? = nil, defaults: String = "", rule: String = "") -> String {
        """
        version: 1
        \(keylog.map { "proxy:\n  keylog: \($0)\n" } ?? "")defaults:
          unpinned: allow\(defaults)
        rules:
          - host: api.example.com
            pins: ["\(pinA)"]\(rule)
        """
    }

    @Test func theFileSystemCheckTellsTmpfsFromDisk() {
        #expect(FileSystemKind.of(Self.memoryDirectory) == .memory)
        #expect(FileSystemKind.of(Self.diskDirectory) != .memory)
        #expect(FileSystemKind.of("/no/such/directory") == .unknown(errno: ENOENT))
    }

    @Test func aKeyLogOnTmpfsLoadsWithItsDefaults() throws {
        let policy = try load(Self.policy(keylog: "{ path: \(Self.memoryDirectory)/pinproxy-keylog }")).get()
        #expect(policy.proxy.keylog == KeyLogSettings(path: "/dev/shm/pinproxy-keylog", wait: 0.1, mode: 0o622, line: 3))
        #expect(policy.rules[0].requireKeylog == false)
        #expect(try load(header).get().proxy.keylog == nil)  // off when absent
    }

    @Test func waitAndModeAreRead() throws {
        let policy = try load(Self.policy(keylog: "{ path: /dev/shm/k, wait: 250ms, mode: \"0620\" }")).get()
        #expect(policy.proxy.keylog?.wait == 0.25 && policy.proxy.keylog?.mode == 0o620)
        #expect(policy.proxy.keylog?.modeText == "0620")
    }

    @Test func aKeyLogThatCouldReachADiskIsAnError() {
        expectError(Self.policy(keylog: "{ path: \(Self.diskDirectory)/keylog }"), line: 3, column: 19, "is not on tmpfs or ramfs")
        expectError(Self.policy(keylog: "{ path: /dev/shm/no-such-dir/keylog }"), line: 3, column: 19, "cannot check the directory '/dev/shm/no-such-dir'")
    }

    @Test(arguments: [
        ("{ path: keylog }", 19, "must be an absolute file path"),
        ("{ path: /dev/shm/ }", 19, "must be an absolute file path"),
        ("{ wait: 1s }", 11, "proxy.keylog needs 'path:'"),
        ("{ path: /dev/shm/k, wait: soon }", 37, "proxy.keylog.wait must be a duration"),
        ("{ path: /dev/shm/k, wait: 0 }", 37, "more than 0 and at most 10s"),
        ("{ path: /dev/shm/k, wait: 11s }", 37, "more than 0 and at most 10s"),
        ("{ path: /dev/shm/k, mode: \"0644\" }", 37, "lets others read the file"),
        ("{ path: /dev/shm/k, mode: \"0640\" }", 37, "lets others read the file"),
        ("{ path: /dev/shm/k, mode: \"0222\" }", 37, "does not let pinproxy's own user read"),
        ("{ path: /dev/shm/k, mode: \"rw\" }", 37, "octal permission bits"),
        ("{ path: /dev/shm/k, mode: \"01622\" }", 37, "octal permission bits"),
        ("{ path: /dev/shm/k, size: 1 }", 31, "unknown key 'size' in proxy.keylog"),
    ])
    func badKeyLogSettingsAreErrorsWithTheirPosition(_ keylog: String, _ column: Int, _ message: String) {
        expectError(Self.policy(keylog: keylog), line: 3, column: column, message)
    }

    @Test func requireKeylogComesFromTheRuleOrElseTheDefaults() throws {
        let keylog = "{ path: /dev/shm/k }"
        #expect(try load(Self.policy(keylog: keylog, rule: "\n    require_keylog: true")).get().rules[0].requireKeylog)
        #expect(try load(Self.policy(keylog: keylog, defaults: "\n  require_keylog: true")).get().rules[0].requireKeylog)
        #expect(try !load(Self.policy(keylog: keylog, defaults: "\n  require_keylog: true", rule: "\n    require_keylog: false")).get().rules[0].requireKeylog)
        #expect(try load(Self.policy(keylog: keylog, defaults: "\n  require_keylog: true")).get().defaults.requireKeylog)
    }

    @Test func requireKeylogWithoutAKeyLogIsAnError() {
        expectError(Self.policy(rule: "\n    require_keylog: true"), line: 7, column: 21, "there is no proxy.keylog")
        expectError(Self.policy(defaults: "\n  require_keylog: true"), line: 4, column: 19, "there is no proxy.keylog")
        // Saying false needs no key log.
        #expect((try? load(Self.policy(rule: "\n    require_keylog: false")).get()) != nil)
    }

    @Test func requireKeylogIsABooleanAndMeansNothingOnAnUnpinnedRule() {
        expectError(Self.policy(keylog: "{ path: /dev/shm/k }", rule: "\n    require_keylog: yes"), line: 9, column: 21, "require_keylog must be true or false")
        expectError("""
            version: 1
            proxy: { keylog: { path: /dev/shm/k } }
            defaults: { unpinned: allow }
            rules:
              - { host: free.example.com, mode: unpinned, require_keylog: true }
            """, line: 5, column: 63, "'require_keylog' has no effect")
    }

    @Test func aNewPathOrModeNeedsARestartAndANewWaitDoesNot() {
        let running = KeyLogSettings(path: "/run/pinproxy/keylog")
        #expect(!running.needsRestart(comparedTo: KeyLogSettings(path: "/run/pinproxy/keylog", wait: 2)))
        #expect(running.needsRestart(comparedTo: KeyLogSettings(path: "/run/pinproxy/other")))
        #expect(running.needsRestart(comparedTo: KeyLogSettings(path: "/run/pinproxy/keylog", mode: 0o620)))
        #expect(running.needsRestart(comparedTo: nil))
    }
}
