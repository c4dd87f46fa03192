"""``python -m trainables.driver``: see ``trainables.driver.run``."""

from trainables.driver.run import main

main()
