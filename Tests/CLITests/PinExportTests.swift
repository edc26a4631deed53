import Foundation
import Testing
import TestSupport

/// `pin --export` and `pin --import nsc`: one pin list in each library's form, and back.
@Suite struct PinExportTests {
    static let policy = """
        version: 1
        defaults: {unpinned: allow}
        rules:
          - host: api.example.com
            pins:
              - { pin: "\(Pins.leafEC)", at: leaf, label: leaf }
              - { pin: "\(Pins.intermediate)", at: ca, label: "R & D <CA>", backup: true }
          - host: "**.example.org"
            pins: ["\(Pins.root)", "\(Pins.backup)"]
            expires: "2027-06-30T00:00:00Z"
            on_expiry: report
          - host: "*.one.test"
            mode: report
            pins: ["\(Pins.root)", "cert-sha256:Ncm0WCZv0rGGOQ6fWFFLAIhu1HP3Bb2fkHk3lqk/RFc="]
          - host: status.example.com
            mode: unpinned

        """
    static func b64(_ pin: String) -> String { String(pin.dropFirst("spki-sha256:".count)) }

    @Test func okhttp() throws {
        let path = try temporaryFile(Self.policy)
        let r = try pinproxy("pin", "--export", "okhttp", "--config", path)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == """
            // OkHttp CertificatePinner, from pinproxy's policy. OkHttp accepts a pin anywhere in the chain.
            val certificatePinner = CertificatePinner.Builder()
                .add("api.example.com", "sha256/\(Self.b64(Pins.leafEC))")
                .add("api.example.com", "sha256/\(Self.b64(Pins.intermediate))")
                .add("**.example.org", "sha256/\(Self.b64(Pins.root))")
                .add("**.example.org", "sha256/\(Self.b64(Pins.backup))")
                // *.one.test: mode: report in the policy; OkHttp enforces these pins
                .add("*.one.test", "sha256/\(Self.b64(Pins.root))")
                // *.one.test: skipped cert-sha256:Ncm0WCZv0rGGOQ6fWFFLAIhu1HP3Bb2fkHk3lqk/RFc= (a certificate pin; this format takes public-key pins only)
                .build()

            """)
    }

    @Test func curlAndTrustKitForChosenRules() throws {
        let path = try temporaryFile(Self.policy)
        let curl = try pinproxy("pin", "--export", "curl", "--config", path, "api.example.com")
        #expect(curl.stdout == """
            # curl --pinnedpubkey, from pinproxy's policy. curl compares the server's own key only (not a CA's).
            # api.example.com
            #   skipped \(Pins.intermediate) (at: ca; curl compares the server's own key only)
            curl --pinnedpubkey "sha256//\(Self.b64(Pins.leafEC))" https://api.example.com/

            """)
        let trustkit = try pinproxy("pin", "--export", "trustkit", "--config", path, "**.example.org")
        #expect(trustkit.stdout == """
            // TrustKit configuration, from pinproxy's policy: TrustKit.initSharedInstance(withConfiguration: trustKitConfig)
            let trustKitConfig: [String: Any] = [
                kTSKSwizzleNetworkDelegates: false,
                kTSKPinnedDomains: [
                    "example.org": [
                        kTSKIncludeSubdomains: true,
                        kTSKEnforcePinning: true,
                        kTSKExpirationDate: "2027-06-30",
                        kTSKPublicKeyHashes: [
                            "\(Self.b64(Pins.root))",
                            "\(Self.b64(Pins.backup))",
                        ],
                    ],
                ],
            ]

            """)
        let unknown = try pinproxy("pin", "--export", "curl", "--config", path, "status.example.com")
        #expect(unknown.status == 1)
        #expect(unknown.stderr == "pinproxy pin --export: no rule with pins named 'status.example.com' in \(path); its rules: api.example.com, **.example.org, *.one.test\n")
    }

    /// Export to network_security_config.xml, import it back: the same pins, `expires` as the date,
    /// and what Android has no word for — a pin's `at:` and backup mark — kept in a comment beside
    /// the pin and read back, so the imported rule is the one exported (no `no_real_backup` from
    /// `check` for it); a pin-set without them says what that means for its backup.
    @Test func nscRoundTrips() throws {
        let path = try temporaryFile(Self.policy)
        let exported = try pinproxy("pin", "--export", "nsc", "--config", path)
        #expect(exported.stdout == """
            <?xml version="1.0" encoding="utf-8"?>
            <!-- From pinproxy's policy. Android checks these pins on top of the system's trust, anywhere in the chain; -->
            <!-- where pinproxy's rule lets a pin match (at:), and its backup mark, are in a comment beside it, for pinproxy's import. -->
            <network-security-config>
                <domain-config>
                    <domain includeSubdomains="false">api.example.com</domain>
                    <pin-set>
                        <pin digest="SHA-256">\(Self.b64(Pins.leafEC))</pin> <!-- at: leaf -->
                        <pin digest="SHA-256">\(Self.b64(Pins.intermediate))</pin> <!-- at: ca, backup: true -->
                    </pin-set>
                </domain-config>
                <domain-config>
                    <domain includeSubdomains="true">example.org</domain>
                    <pin-set expiration="2027-06-30">
                        <pin digest="SHA-256">\(Self.b64(Pins.root))</pin>
                        <pin digest="SHA-256">\(Self.b64(Pins.backup))</pin>
                    </pin-set>
                </domain-config>
                <!-- *.one.test: a one-label wildcard has no network_security_config form; skipped -->
            </network-security-config>

            """)
        let xml = try temporaryFile(exported.stdout, name: "network_security_config.xml")
        let imported = try pinproxy("pin", "--import", "nsc", xml)
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(imported.stdout == """
            # pinproxy pin --import nsc \(xml): 2 rules from its <pin-set>s.
            # Android checks the pins on top of the system's trust, and so do these rules (trust: system, the default).
            # Android matches a pin anywhere in the chain and has no word for a backup: a pin is imported at: any, unmarked,
            # unless a comment beside it (as pinproxy pin --export nsc writes) says at: and backup: true. Ready-to-paste rules (under rules:):
            - host: "api.example.com"
              pins:
                - { pin: "\(Pins.leafEC)", at: leaf }
                - { pin: "\(Pins.intermediate)", at: ca, backup: true }
            - host: "**.example.org"
              pins:
                - { pin: "\(Pins.root)", at: any }
                - { pin: "\(Pins.backup)", at: any }
                # The file does not say which of these is the server's key, which a CA's, nor which is the backup. If they are the
                # server's key and its issuing CA's, every pin matches the one chain the server serves: no real backup, and
                # pinproxy check and the log say no_real_backup. Say at: leaf for the server's key and at: ca for a CA's
                # (backup: true on the CA if you accept it as the backup), or add a spare key kept offline.
              expires: "2027-06-30T00:00:00Z"
              on_expiry: report                 # Android stops checking the pins after its expiration date

            """)
        // Pasted under rules:, it loads, and exports to the same XML.
        let rules = imported.stdout.split(separator: "\n").filter { !$0.hasPrefix("#") }.map { "  " + $0 }.joined(separator: "\n")
        let again = try temporaryFile("version: 1\ndefaults: {unpinned: allow}\nrules:\n\(rules)\n")
        let check = try pinproxy("check", "--config", again)
        #expect(check.status == 0, "\(check.stderr)")
        // What check says of the imported rules is what it says of the exported ones: the marked
        // CA is a backup; two unplaced pins may be none.
        let lint = { (r: Run, file: String) in r.stdout.split(separator: "\n").filter { $0.contains("warning[") }.map { $0.replacingOccurrences(of: file, with: "FILE").components(separatedBy: " may have")[0] } }
        #expect(lint(check, again) == ["FILE:8: warning[no_real_backup]: the rule for '**.example.org'"])
        #expect(lint(try pinproxy("check", "--config", path), path).filter { $0.contains("no_real_backup") } == ["FILE:8: warning[no_real_backup]: the rule for '**.example.org'"])
        let reexported = try pinproxy("pin", "--export", "nsc", "--config", again)
        #expect(reexported.stdout == exported.stdout.replacingOccurrences(of: "    <!-- *.one.test: a one-label wildcard has no network_security_config form; skipped -->\n", with: ""))
    }

    /// Rules for one name on two ports: Android and TrustKit configure a domain once (a second
    /// domain-config is refused, a duplicate dictionary key traps), so the second is a comment.
    @Test func aNameOnTwoPortsIsExportedOnce() throws {
        let path = try temporaryFile("""
            version: 1
            proxy: { allowed_ports: [443, 8443] }
            defaults: {unpinned: allow}
            rules:
              - host: api.example.com
                ports: [443]
                pins: ["\(Pins.leafEC)", "\(Pins.backup)"]
              - host: api.example.com
                ports: [8443]
                pins: ["\(Pins.root)", "\(Pins.backup)"]

            """)
        let nsc = try pinproxy("pin", "--export", "nsc", "--config", path)
        #expect(nsc.stdout.components(separatedBy: "<domain-config>").count == 2)
        #expect(nsc.stdout.contains("    <!-- api.example.com:8443: api.example.com has a domain-config already (pins are per domain, not per port); skipped -->\n"))
        let trustkit = try pinproxy("pin", "--export", "trustkit", "--config", path)
        #expect(trustkit.stdout.contains("        // api.example.com:8443: \"api.example.com\" is configured already (pins are per domain, not per port); skipped\n"))
        #expect(!trustkit.stdout.contains(Self.b64(Pins.root)))
    }

    /// The import reads the file as it comes (issue 30), yet writes what a walk of the tree would:
    /// a pin-set after its domains still applies to them, and a domain-config's own domains come
    /// before those of one nested in it, even one written above them.
    @Test func nscImportOrderDoesNotFollowTheText() throws {
        let file = try temporaryFile("""
            <network-security-config>
              <domain-config>
                <domain-config><domain>nested.example.com</domain></domain-config>
                <domain>outer.example.com</domain>
                <pin-set><pin digest="SHA-256">\(Self.b64(Pins.leafEC))</pin><!-- at: leaf --></pin-set>
              </domain-config>
            </network-security-config>
            """, name: "nsc.xml")
        let r = try pinproxy("pin", "--import", "nsc", file)
        let rule = { (host: String) in
            """
            - host: "\(host)"
              pins:
                - { pin: "\(Pins.leafEC)", at: leaf }
                # add a backup: a real backup is a key not in the served chain (a spare kept offline: '{ file: next-key.pub.pem, at: leaf, label: backup }') or a CA pin marked 'backup: true' (then any key that CA certifies for the name passes)

            """
        }
        #expect(r.status == 0)
        #expect(r.stdout.hasPrefix("# pinproxy pin --import nsc \(file): 2 rules from its <pin-set>s.\n"))
        #expect(r.stdout.hasSuffix("Ready-to-paste rules (under rules:):\n" + rule("outer.example.com") + rule("nested.example.com")))
    }

    /// Android's inheritance (a nested domain-config without a pin-set takes its parent's), and
    /// what the strict reader refuses.
    @Test func nscImportInheritsAndRefusesWhatItCannotRead() throws {
        let nested = try temporaryFile("""
            <?xml version="1.0" encoding="utf-8"?>
            <network-security-config>
              <base-config cleartextTrafficPermitted="false"/>
              <domain-config>
                <domain includeSubdomains="true">example.com</domain>
                <pin-set expiration="2027-01-31"><pin digest="SHA-256">\(Self.b64(Pins.leafEC))</pin><pin digest="SHA-256">\(Self.b64(Pins.backup))</pin></pin-set>
                <domain-config cleartextTrafficPermitted="true">
                  <trust-anchors><certificates src="@raw/legacy_ca"/></trust-anchors>
                  <domain>legacy.example.com</domain>
                </domain-config>
              </domain-config>
            </network-security-config>
            """, name: "nsc.xml")
        let r = try pinproxy("pin", "--import", "nsc", nested)
        let unplaced = """
                # The file does not say which of these is the server's key, which a CA's, nor which is the backup. If they are the
                # server's key and its issuing CA's, every pin matches the one chain the server serves: no real backup, and
                # pinproxy check and the log say no_real_backup. Say at: leaf for the server's key and at: ca for a CA's
                # (backup: true on the CA if you accept it as the backup), or add a spare key kept offline.
            """
        #expect(r.stdout.hasSuffix("""
            - host: "**.example.com"
              pins:
                - { pin: "\(Pins.leafEC)", at: any }
                - { pin: "\(Pins.backup)", at: any }
            \(unplaced)
              expires: "2027-01-31T00:00:00Z"
              on_expiry: report                 # Android stops checking the pins after its expiration date
            # line 9: its <domain-config> names <trust-anchors>, which are not imported: if the server's chain needs that CA, add trust: "ca-file:/path/to/ca.pem"
            - host: "legacy.example.com"
              pins:
                - { pin: "\(Pins.leafEC)", at: any }
                - { pin: "\(Pins.backup)", at: any }
            \(unplaced)
              expires: "2027-01-31T00:00:00Z"
              on_expiry: report                 # Android stops checking the pins after its expiration date

            """))
        let cases: [(String, String)] = [
            ("<?xml version=\"1.0\"?>\n<!DOCTYPE x [<!ENTITY e SYSTEM \"file:///etc/passwd\">]>\n<network-security-config/>", "line 2: a DTD (<!DOCTYPE …>) is not read"),
            ("<network-security-config>\n<domain-config><domain>a.test</domain>\n<pin-set><pin digest=\"SHA-1\">AAAA</pin></pin-set></domain-config></network-security-config>", "line 3: a <pin> needs digest=\"SHA-256\" (the only digest Android accepts), not 'SHA-1'"),
            ("<network-security-config><domain-config>\n<domain>a.test</domain></domain-config>", "line 2: <network-security-config> (line 1) is not closed"),
            ("<network-security-config><domain-config><domain>a.test</domain>\n<pin-set><pin digest=\"SHA-256\">&bogus;</pin></pin-set></domain-config></network-security-config>", "line 2: unknown entity '&bogus;' (no DTD defines any)"),
            (String(repeating: "<domain-config>", count: 40), "line 1: elements nested deeper than 32"),
            ("<network-security-config><domain-config><domain>a.test</domain>\n<pin-set><pin digest=\"SHA-256\">\(Pins.leafEC)</pin></pin-set></domain-config></network-security-config>", "line 2: '\(Pins.leafEC)' is not valid base64 or hex"),
        ]
        for (text, message) in cases {
            let file = try temporaryFile(text, name: "bad.xml")
            let bad = try pinproxy("pin", "--import", "nsc", file)
            #expect(bad.status == 1)
            #expect(bad.stderr == "pinproxy pin --import: \(file): \(message)\n")
        }
    }
}
