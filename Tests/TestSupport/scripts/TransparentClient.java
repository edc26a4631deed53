// Java's HttpClient with no proxy setting (Java reads no HTTPS_PROXY), for the transparent-mode
// tests: one GET; the namespace's redirect sends it to pinproxy. The name reaches the test's address
// through -Djdk.net.hosts.file (a file the test writes), the test root through -Djavax.net.ssl.trustStore.
// Prints "java STATUS" or "java error KIND".
//
//   java TransparentClient.java URL
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;

public class TransparentClient {
    public static void main(String[] args) {
        try {
            HttpClient client = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();
            HttpRequest request = HttpRequest.newBuilder(URI.create(args[0])).timeout(Duration.ofSeconds(10)).build();
            HttpResponse<String> response = client.send(request, HttpResponse.BodyHandlers.ofString());
            System.out.println("java " + response.statusCode());
        } catch (Exception e) {
            System.out.println("java error " + e.getClass().getSimpleName());
        }
    }
}
