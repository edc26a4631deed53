import Foundation
import Testing
import TestSupport

let fixtures = Paths.fixtures

func pinproxy(_ arguments: String...) throws -> Run { try run(Paths.pinproxy, arguments) }

@Suite struct CheckCommandTests {
    @Test(arguments: ["config/pinproxy.yaml", "config/examples/strict-allowlist.yaml", "config/examples/self-signed-internal.yaml"])
    func shippedConfigsPass(path: String) throws {
        let r = try pinproxy("check", "--config", path)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.hasPrefix("\(path): OK\n"))
        #expect(r.stderr.isEmpty)
    }

    @Test func theDefaultConfigEnforcesNothingAndAllowsUnpinned() throws {
        let r = try pinproxy("check", "--config", "config/pinproxy.yaml", "--strict")
        #expect(r.status == 0)
        #expect(r.stdout.contains("0 rules (0 enforced, 0 report, 0 unpinned); 0 pinsets; 0 deny-listed keys; unpinned hosts: allow; listen: 127.0.0.1:3128"))
    }

    @Test func errorsArePrintedWithFileLineColumnAndExit1() throws {
        let path = try temporaryFile("version: 1\ndefaults:\n  unpinned: allow\nrules:\n  - host: \"**\"\n    pins: [\"sha1/AAAAAAAAAAAAAAAAAAAAAAAAAAA=\"]\n    colour: red\n")
        let r = try pinproxy("check", "--config", path)
        #expect(r.status == 1)
        #expect(r.stdout.isEmpty)
        #expect(r.stderr == """
            \(path):5:11: error: bad host pattern '**': a bare '*' or '**' matches everything; list the domains instead
            \(path):6:12: error: SHA-1 pins are refused; use a SHA-256 pin (spki-sha256:…)
            \(path):7:5: error: unknown key 'colour' in a rule; known keys: host, ip, ports, pins, pinset, mode, trust, expires, on_expiry, require_keylog
            \(path): 3 errors; the policy was not loaded

            """)
    }

    @Test func aMissingFileIsAnErrorNotACrash() throws {
        let r = try pinproxy("check", "--config", "/nonexistent/pinproxy.yaml")
        #expect(r.status == 1)
        #expect(r.stdout.isEmpty)
        #expect(r.stderr == "/nonexistent/pinproxy.yaml: error: cannot read /nonexistent/pinproxy.yaml: No such file or directory (errno 2)\n/nonexistent/pinproxy.yaml: 1 error; the policy was not loaded\n")
        let directory = try temporaryDirectory()
        let notAFile = try pinproxy("check", "--config", directory)
        #expect(notAFile.stderr == "\(directory): error: cannot read \(directory): Is a directory (errno 21)\n\(directory): 1 error; the policy was not loaded\n")
        let pin = try pinproxy("pin", "127.0.0.1:1", "--config", "/nonexistent/pinproxy.yaml")
        #expect(pin.status == 1)
        #expect(pin.stderr == "/nonexistent/pinproxy.yaml: error: cannot read /nonexistent/pinproxy.yaml: No such file or directory (errno 2)\n")
    }

    @Test func warningsPassUnlessStrict() throws {
        let path = try temporaryFile("version: 1\ndefaults: {unpinned: allow}\nrules:\n  - host: a.test\n    pins: [\"spki-sha256:kBQGSGfznkVIdbhVncSBp6O/buiORHazf74OhcSQKZE=\"]\n")
        let relaxed = try pinproxy("check", "--config", path)
        #expect(relaxed.status == 0)
        #expect(relaxed.stdout.contains("\(path):4: warning[missing_backup_pin]: the rule for 'a.test' has only one distinct pin"))
        let strict = try pinproxy("check", "--config", path, "--strict")
        #expect(strict.status == 1)
        #expect(strict.stderr == "1 warning with --strict\n")
    }

    @Test func explainShowsTheRuleAndItsPins() throws {
        let r = try pinproxy("check", "--config", "config/examples/strict-allowlist.yaml", "--explain", "API.example.com.:443", "--explain", "nothing.test:443")
        #expect(r.status == 0)
        #expect(r.stdout.contains("""
            CONNECT api.example.com:443
            rule at line 24: 'api.example.com', mode: enforce, trust: system, pinset: example-keys
            """))
        #expect(r.stdout.contains("  spki-sha256:WwVBfKtcnP1H4GTEAlaKbG5eqHWzhDIdOZvcYdtyivk=  at: leaf  (offline backup key)"))
        #expect(r.stdout.contains("CONNECT nothing.test:443\nno rule matches; defaults.unpinned is deny → refused with 403"))
        let bad = try pinproxy("check", "--config", "config/pinproxy.yaml", "--explain", "127.1:443")
        #expect(bad.status == 1)
        #expect(bad.stderr.contains("--explain 127.1:443: this looks like an IPv4 address in a non-canonical form"))
    }
}

@Suite struct PinCommandTests {
    /// `openssl x509 -pubkey -noout | openssl pkey -pubin -outform DER | openssl dgst -sha256 -binary | base64`, run now.
    func opensslSPKIPin(_ file: String) throws -> String {
        let r = try run("/bin/sh", ["-c", "openssl x509 -in '\(file)' -pubkey -noout | openssl pkey -pubin -outform DER | openssl dgst -sha256 -binary | base64"])
        return "spki-sha256:" + r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test(arguments: ["leaf-rsa2048", "leaf-ec256", "leaf-ed25519", "good-root", "good-intermediate", "rogue-leaf", "self-signed"])
    func spkiPinEqualsTheOpenSSLPipeline(name: String) throws {
        let file = "\(fixtures)/\(name).pem"
        let r = try pinproxy("pin", "--cert", file)
        #expect(r.status == 0)
        #expect(r.stdout.contains("spki pin:  \(try opensslSPKIPin(file))\n"))
    }

    @Test func chainOutputAndReadyToPasteRule() throws {
        let r = try pinproxy("pin", "--cert", "\(fixtures)/leaf-ec256.chain.pem")
        #expect(r.status == 0)
        #expect(r.stdout.contains("certificate 1 of 2\nsubject:   CN=api.pinproxy.test,O=pinproxy tests\nissuer:    CN=pinproxy good intermediate,O=pinproxy tests\n"))
        #expect(r.stdout.contains("key:       EC P-384 (CA certificate)"))
        #expect(r.stdout.contains("cert pin:  cert-sha256:KB/WlQODyjgpcs/y6wyQsjdoZLbXsX2rKZEI3KxZqq0=\n"))
        #expect(r.stdout.contains("""
            - host: "api.pinproxy.test"
              pins:
                - { pin: "spki-sha256:kBQGSGfznkVIdbhVncSBp6O/buiORHazf74OhcSQKZE=", at: leaf, label: "CN=api.pinproxy.test,O=pinproxy tests" }
                - { pin: "spki-sha256:KCDrug7ej6zlHN6aFwgek+aRk6ExpqGsKfgGdPF+qhM=", at: ca, label: "CN=pinproxy good intermediate,O=pinproxy tests", backup: true }
                # backup: true accepts the issuing CA as the backup: any key it certifies for the name passes.
                # Stricter: replace that line with a spare key not in use yet, kept offline: { file: next-key.pub.pem, at: leaf, label: backup }
            """))
    }

    @Test func theSuggestedRuleLoadsAsPolicy() throws {
        let r = try pinproxy("pin", "--cert", "\(fixtures)/leaf-ec256.chain.pem")
        let rule = r.stdout.components(separatedBy: "# Ready-to-paste rule").last!.split(separator: "\n").dropFirst().map { "  " + $0 }.joined(separator: "\n")
        let path = try temporaryFile("version: 1\ndefaults: {unpinned: allow}\nrules:\n\(rule)\n")
        let check = try pinproxy("check", "--config", path, "--strict")
        #expect(check.status == 0, "\(check.stderr)\n\(check.stdout)")
    }

    @Test func unreadableInputsFailCleanly() throws {
        let missing = try pinproxy("pin", "--cert", "/nonexistent.pem")
        #expect(missing.status == 1)
        #expect(missing.stderr == "pinproxy pin: /nonexistent.pem: cannot read the file\n")
        let garbage = try pinproxy("pin", "--cert", "\(fixtures)/make-fixtures.sh")
        #expect(garbage.status == 1)
        #expect(garbage.stderr.contains("not a readable certificate"))
        let none = try pinproxy("pin")
        #expect(none.status != 0)
        #expect(none.stderr.contains("give HOST[:PORT] or --cert FILE..."))
    }
}

/// What the `.deb` is made of that comes from the CLI itself (`.ci/build-deb` runs these and
/// `.ci/check-deb` checks the package it made).
@Suite struct InstallTests {
    @Test func versionIsPrintedAndLoggedInStartedAndStopped() throws {
        let r = try pinproxy("--version")
        #expect(r.status == 0)
        #expect(r.stderr.isEmpty)
        let version = r.stdout.trimmingCharacters(in: .newlines)
        #expect(r.stdout == version + "\n")
        #expect(version.split(separator: ".").count == 3 && version.split(separator: ".").allSatisfy { $0.allSatisfy(\.isNumber) }, "\(version)")
        let proxy = try ProxyProcess(config: "version: 1\nproxy: { stats_interval: 0 }\ndefaults: { unpinned: allow }\n")
        #expect(proxy.events("started").first?["version"] == version)
        #expect(proxy.stop() == 0)
        #expect(proxy.events("stopped").first?["version"] == version)
    }

    @Test(arguments: ["bash", "zsh"])
    func completionScriptsCoverEverySubcommandAndOption(shell: String) throws {
        let r = try pinproxy("--generate-completion-script", shell)
        #expect(r.status == 0)
        #expect(r.stderr.isEmpty)
        for word in ["run", "check", "pin", "--config", "--listen", "--log-format", "--debug-bypass", "--strict", "--explain", "--probe",
                     "--cert", "--connect-to", "--version"] {
            #expect(r.stdout.contains(word), "\(shell) completion lacks \(word)")
        }
        #expect(!r.stdout.contains("--log-queue-bytes"))  // hidden options stay hidden
        if shell == "bash" {
            let syntax = try run("/bin/bash", ["-n", try temporaryFile(r.stdout, name: "completion")])
            #expect(syntax.status == 0, "\(syntax.stderr)")
        } else {
            #expect(r.stdout.hasPrefix("#compdef pinproxy\n"))
        }
    }
}

/// The sharp edges of the pin workflow that need no server (the others: PinWorkflowTests).
@Suite struct PinWorkflowCLITests {
    /// A public-key file, what the policy accepts as a `file:` pin and what an offline backup key is.
    @Test func pinCertAcceptsAPublicKey() throws {
        let r = try pinproxy("pin", "--cert", "\(fixtures)/backup.pub.pem")
        #expect(r.status == 0, "\(r.stderr)")
        let openssl = try run("/bin/sh", ["-c", "openssl pkey -pubin -in '\(fixtures)/backup.pub.pem' -outform DER | openssl dgst -sha256 -binary | base64"])
        let pin = "spki-sha256:" + openssl.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(r.stdout == """
            # \(fixtures)/backup.pub.pem: a public key (no certificate)
            spki pin:  \(pin)

            # Pin entries for a rule's pins: (a key without a certificate: a backup, or the key itself):
                - { pin: "\(pin)", label: "backup.pub.pem" }   # or { file: \(fixtures)/backup.pub.pem }

            """)
        let both = try pinproxy("pin", "--cert", "\(fixtures)/leaf-ec256.pem", "\(fixtures)/backup.pub.pem")
        #expect(both.status == 0)
        #expect(both.stdout.contains("- host: \"api.pinproxy.test\"\n"))
        #expect(both.stdout.hasSuffix("    - { pin: \"\(pin)\", label: \"backup.pub.pem\" }   # or { file: \(fixtures)/backup.pub.pem }\n"))
    }

    @Test func checkWarnsAboutAResolvedNameInDenyDestinations() throws {
        let path = try temporaryFile("version: 1\ndefaults: {unpinned: allow}\nresolve:\n  api.internal.test: 127.0.0.1\n")
        let r = try pinproxy("check", "--config", path)
        #expect(r.status == 0)
        #expect(r.stdout.contains("\(path):4: warning[resolve_to_denied_destination]: resolve: sends 'api.internal.test' to 127.0.0.1 (loopback), which proxy.deny_destinations refuses: every CONNECT to it is refused with 403 destination_ip_prohibited"))
        #expect(try pinproxy("check", "--config", path, "--strict").status == 1)
    }

    @Test func portNeedsProbe() throws {
        let r = try pinproxy("check", "--config", "config/pinproxy.yaml", "--port", "8443")
        #expect(r.status != 0)
        #expect(r.stderr.contains("--port goes with --probe"))
    }
}
