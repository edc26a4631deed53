import Foundation
import Testing
import TestSupport

/// The man pages (docs/man/) render without a warning and pinproxy(8) has every subcommand and
/// every option `--help` shows; the policy guide's full example passes `check` as written.
@Suite struct DocsTests {
    static let pages = ["docs/man/pinproxy.8", "docs/man/pinproxy.yaml.5"]

    /// The page as man(1) renders it, and what man and groff said on stderr.
    static func render(_ page: String) throws -> Run {
        try run("/usr/bin/man", ["--warnings", "-l", Paths.repository.appendingPathComponent(page).path],
                environment: ["MANWIDTH": "100", "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"], timeout: 60)
    }

    @Test(arguments: pages) func theManPageRendersWithoutAWarning(page: String) throws {
        let r = try Self.render(page)
        #expect(r.status == 0)
        #expect(r.stderr.isEmpty, "\(page): \(r.stderr)")
        #expect(r.stdout.contains("NAME") && r.stdout.contains("SEE ALSO"))
    }

    /// `--long-option`s in a help text or a rendered page.
    static func options(in text: String) -> Set<String> {
        let pattern = try! NSRegularExpression(pattern: "--[a-z][a-z-]*")
        return Set(pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)).map { String(text[Range($0.range, in: text)!]) })
    }

    @Test func pinproxy8HasEveryCommandAndOptionOfTheHelp() throws {
        let page = try Self.render("docs/man/pinproxy.8").stdout
        let sections = ["NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "OPTIONS", "FILES", "SIGNALS", "ENVIRONMENT", "EXIT STATUS", "EXAMPLES", "SEE ALSO"]
        #expect(sections.filter { !page.contains("\n\($0)\n") }.isEmpty, "missing sections")
        let top = try pinproxy("--help").stdout
        // "  run                     Run the proxy."
        let row = try NSRegularExpression(pattern: "^  ([a-z][a-z-]*)  +\\S", options: .anchorsMatchLines)
        let listing = top.components(separatedBy: "SUBCOMMANDS:").last!
        let subcommands = row.matches(in: listing, range: NSRange(listing.startIndex..., in: listing)).map { String(listing[Range($0.range(at: 1), in: listing)!]) }
        #expect(Set(["run", "check", "pin"]).isSubset(of: subcommands), "\(subcommands)")
        for command in subcommands {
            #expect(page.contains("\n       \(command) ") || page.contains("\n       \(command)\n"), "COMMANDS lacks \(command)")
            let help = try pinproxy(command, "--help").stdout
            let missing = Self.options(in: help).subtracting(Self.options(in: page))
            #expect(missing.isEmpty, "pinproxy(8) lacks \(command)'s \(missing.sorted())")
        }
        #expect(Self.options(in: top).subtracting(Self.options(in: page)).isEmpty)
    }

    /// The example under "Policy file" in docs/policy.md, with the pin file it names next to it.
    @Test func thePolicyGuidesFullExamplePassesCheck() throws {
        let guide = try String(contentsOf: Paths.repository.appendingPathComponent("docs/policy.md"), encoding: .utf8)
        let section = try #require(guide.components(separatedBy: "\n## Policy file\n").dropFirst().first)
        let example = try #require(section.components(separatedBy: "```yaml\n").dropFirst().first?.components(separatedBy: "\n```").first)
        #expect(example.contains("rules:") && example.contains("pinsets:"))
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createDirectory(atPath: directory + "/keys", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: Paths.repository.appendingPathComponent("config/examples/keys/example-backup.pub.pem").path,
                                         toPath: directory + "/keys/example-backup.pub.pem")
        try example.write(toFile: directory + "/pinproxy.yaml", atomically: true, encoding: .utf8)
        let r = try pinproxy("check", "--config", directory + "/pinproxy.yaml")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.hasPrefix(directory + "/pinproxy.yaml: OK\n"))
    }

    static let markdown = ["README.md"] + ((try? FileManager.default.contentsOfDirectory(atPath: Paths.repository.appendingPathComponent("docs").path)) ?? [])
        .filter { $0.hasSuffix(".md") }.sorted().map { "docs/" + $0 }

    /// GitHub's anchors for a page's headings: lowercase, punctuation dropped, spaces as hyphens.
    static func anchors(_ text: String) -> Set<String> {
        var anchors = Set<String>(), inCode = false
        for line in text.split(separator: "\n") {
            if line.hasPrefix("```") { inCode.toggle() }
            guard !inCode, line.hasPrefix("#"), let space = line.firstIndex(of: " ") else { continue }
            let title = line[line.index(after: space)...].lowercased()
            anchors.insert(String(title.unicodeScalars.filter { CharacterSet.alphanumerics.contains($0) || $0 == " " || $0 == "-" || $0 == "_" }
                .map(Character.init)).replacingOccurrences(of: " ", with: "-"))
        }
        return anchors
    }

    /// Every relative link of the README and the guides leads to a file of the repository (and a
    /// heading of it), and none cites a design file users do not have.
    @Test func everyLinkOfTheDocsResolvesInTheRepository() throws {
        #expect(Self.markdown.count >= 7, "\(Self.markdown)")
        let link = try NSRegularExpression(pattern: "\\]\\(([^)]+)\\)")
        for page in Self.markdown {
            let url = Paths.repository.appendingPathComponent(page)
            let text = try String(contentsOf: url, encoding: .utf8)
            for name in ["DESIGN.md", "POLICY.md", "STACK.md", "STYLE.md"] { #expect(!text.contains(name), "\(page) cites \(name)") }
            for match in link.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                let target = String(text[Range(match.range(at: 1), in: text)!])
                guard !target.hasPrefix("http") else { continue }
                let parts = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
                let file = parts[0].isEmpty ? url : url.deletingLastPathComponent().appendingPathComponent(parts[0]).standardizedFileURL
                #expect(FileManager.default.fileExists(atPath: file.path), "\(page): \(target) is not in the repository")
                if parts.count == 2, file.pathExtension == "md", let linked = try? String(contentsOf: file, encoding: .utf8) {
                    #expect(Self.anchors(linked).contains(parts[1]), "\(page): \(target) names no heading")
                }
            }
        }
    }

    /// How many tests there are is `swift test`'s to say: a count in the docs goes stale with the
    /// next test (docs/development.md once said 422 in one place and 350 in another, while
    /// `swift test` ran 795).
    @Test func noDocumentCountsTheTests() throws {
        let count = try NSRegularExpression(pattern: "\\b[0-9][0-9,]*\\s+(?:[A-Za-z+-]+\\s+){0,2}(?:tests|test cases)\\b")
        let manPages = Self.pages
        for page in Self.markdown + manPages {
            let text = try String(contentsOf: Paths.repository.appendingPathComponent(page), encoding: .utf8)
            let found = count.matches(in: text, range: NSRange(text.startIndex..., in: text)).map { String(text[Range($0.range, in: text)!]) }
            #expect(found.isEmpty, "\(page) counts the tests: \(found)")
        }
    }

    /// The README's time for the whole suite is the one measurement docs/development.md records,
    /// with its date, rounded to the minute: the figure is measured, never guessed, and changing
    /// one without the other fails here.
    @Test func theREADMEsSuiteTimeIsTheMeasuredOne() throws {
        func text(_ page: String) throws -> String { try String(contentsOf: Paths.repository.appendingPathComponent(page), encoding: .utf8) }
        func matches(_ pattern: String, _ text: String) throws -> [[String]] {
            try NSRegularExpression(pattern: pattern).matches(in: text, range: NSRange(text.startIndex..., in: text)).map { match in
                (0..<match.numberOfRanges).map { String(text[Range(match.range(at: $0), in: text)!]) }
            }
        }
        let development = try text("docs/development.md")
        let records = try matches("measured on\\s+(20[0-9]{2}-[0-9]{2}-[0-9]{2})[^*]*\\*\\*([0-9]+) min ([0-9]+) s\\*\\*", development)
        #expect(records.count == 1, "docs/development.md should record the suite's time once: \(records.map { $0[0] })")
        let readme = try matches("whole test suite\\s+\\((?:about\\s+)?([0-9]+)\\s+minutes?\\s+on 2 cores", try text("README.md"))
        #expect(readme.count == 1, "the README's Quick start should say how long the suite takes: \(readme.map { $0[0] })")
        guard let record = records.first, let said = readme.first, let minutes = Int(record[2]), let seconds = Int(record[3]) else { return }
        #expect(Int(said[1]) == (minutes * 60 + seconds + 30) / 60, "README says \(said[0]); docs/development.md measured \(record[0])")
    }

    /// docs/development.md's table of ProxyCore's folders names each folder of the tree, and no
    /// folder that is not there.
    @Test func theFolderTableIsTheTree() throws {
        let development = try String(contentsOf: Paths.repository.appendingPathComponent("docs/development.md"), encoding: .utf8)
        guard let header = development.range(of: "| folder | what |") else {
            Issue.record("docs/development.md has no folder table")
            return
        }
        var rows = Set<String>()
        for line in development[header.upperBound...].split(separator: "\n", omittingEmptySubsequences: false).dropFirst(2) {
            guard line.hasPrefix("| `") else { break }
            rows.insert(String(line.dropFirst(3).prefix { $0 != "`" }).trimmingCharacters(in: CharacterSet(charactersIn: "/")))
        }
        let root = Paths.repository.appendingPathComponent("Sources/ProxyCore").path
        let folders = Set(try FileManager.default.contentsOfDirectory(atPath: root).filter { name in
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: root + "/" + name, isDirectory: &isDirectory) && isDirectory.boolValue
        })
        #expect(rows == folders, "in the table only: \(rows.subtracting(folders).sorted()); in the tree only: \(folders.subtracting(rows).sorted())")
    }

    /// The code's comments stand on their own: none cites a design file that is not in the repository.
    @Test func noCommentCitesADocumentOutsideTheRepository() throws {
        let citation = try NSRegularExpression(pattern: "\\b(DESIGN|STYLE|STACK|POLICY)(\\.md\\b| §| step| pipeline)")
        for folder in ["Sources", "Tests", "Fuzz", "Benchmarks"] {
            let root = Paths.repository.appendingPathComponent(folder)
            guard let walk = FileManager.default.enumerator(atPath: root.path) else { continue }
            for case let path as String in walk where path.hasSuffix(".swift") || path.hasSuffix(".sh") || path.hasSuffix(".py") {
                // Fuzz/out holds the fuzz build's copies of the sources (ignored by git), as they were.
                guard path != "DocsTests.swift", !path.hasSuffix("/DocsTests.swift"), !(folder == "Fuzz" && path.hasPrefix("out/")) else { continue }
                let text = try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
                let found = citation.matches(in: text, range: NSRange(text.startIndex..., in: text)).map { String(text[Range($0.range, in: text)!]) }
                #expect(found.isEmpty, "\(folder)/\(path) cites \(found)")
            }
        }
    }
}
