import Foundation
import Testing
import TestSupport

/// config/examples/pinproxy-egress*.nft, the rule set that makes going direct fail closed, is
/// accepted by `nft -c -f` (parsed and checked against the kernel's rule types without loading).
@Suite(.serialized) struct EgressExampleTests {
    static let examples = Paths.repository.appendingPathComponent("config/examples").path

    @Test func theBootRuleSetChecks() throws {
        let r = try run("/usr/sbin/nft", ["-c", "-f", "\(Self.examples)/pinproxy-egress.nft"], timeout: 30)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.isEmpty)
    }

    /// The exception needs its cgroup to exist when it is loaded (nft resolves the path to an id), and
    /// no pinproxy.service runs here: it is checked after the boot rule set with the path of a cgroup
    /// this machine has, the rest of it unchanged.
    @Test func theServicesExceptionChecksAfterTheBootRuleSet() throws {
        let boot = try String(contentsOfFile: "\(Self.examples)/pinproxy-egress.nft", encoding: .utf8)
        let allow = try String(contentsOfFile: "\(Self.examples)/pinproxy-egress-allow.nft", encoding: .utf8)
        #expect(allow.contains("socket cgroupv2 level 2 \"system.slice/pinproxy.service\" accept"))
        let cgroup = try #require(try FileManager.default.contentsOfDirectory(atPath: "/sys/fs/cgroup").sorted().first { name in
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: "/sys/fs/cgroup/\(name)", isDirectory: &isDirectory) && isDirectory.boolValue
        })
        let here = allow.replacingOccurrences(of: "level 2 \"system.slice/pinproxy.service\"", with: "level 1 \"\(cgroup)\"")
        let combined = try temporaryFile(boot + "\n" + here, name: "egress.nft")
        let r = try run("/usr/sbin/nft", ["-c", "-f", combined], timeout: 30)
        #expect(r.status == 0, "\(r.stderr)")
        // The check is real: a rule that names a chain the boot set lacks is refused.
        let broken = try temporaryFile(boot + "\n" + here.replacingOccurrences(of: "allowed socket", with: "permitted socket"), name: "broken.nft")
        let refused = try run("/usr/sbin/nft", ["-c", "-f", broken], timeout: 30)
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("No such file or directory"), "\(refused.stderr)")
    }
}
