import java.util.concurrent.CountDownLatch;

import org.apache.solr.embedded.JettyConfig;
import org.apache.solr.embedded.JettySolrRunner;

/**
 * Starts a standalone Solr (embedded Jetty, no ZooKeeper) for Weir's tests
 * (see ../solr.sh) and keeps the JVM alive until it is told to stop.
 *
 *   java -cp 'libs/*:launcher' Launcher SOLR_HOME PORT
 *
 * Solr answers under http://127.0.0.1:PORT/solr; JettySolrRunner binds
 * 127.0.0.1 only. Failures are printed with their stack trace.
 */
public final class Launcher {
    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: Launcher SOLR_HOME PORT");
            System.exit(2);
        }
        String home = args[0];
        int port = Integer.parseInt(args[1]);

        JettyConfig config = JettyConfig.builder()
                .setPort(port)
                .setContext("/solr")
                // By default it retries a taken port for 60 s; fail soon instead.
                .withPortRetryTime(5)
                .build();
        JettySolrRunner solr = new JettySolrRunner(home, config);

        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                solr.stop();
            } catch (Exception e) {
                e.printStackTrace();
            }
            stopped.countDown();
        }));

        try {
            solr.start();
        } catch (Throwable e) {
            System.err.println("solr failed to start:");
            e.printStackTrace();
            System.exit(1);
        }
        System.out.println("solr started on 127.0.0.1:" + solr.getLocalPort());
        stopped.await();
    }
}
