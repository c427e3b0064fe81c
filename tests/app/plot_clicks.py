"""A real mouse click on a timeline figure in headless Chromium, at a time on a named lane (shared by the browser
tests of the timeline, compare and memory views)."""

from __future__ import annotations

from selenium.webdriver.common.action_chains import ActionChains


def click_on_lane(dash_duo, graph: str, lane: str, x: float, panel: str = "") -> None:
    """Click the figure in `#graph` at time `x` on the lane named `lane` of a panel ("" the first, "2" the second:
    its axes' suffix), with the mouse (Plotly hit-tests what is under it)."""
    plot = dash_duo.find_element(f"#{graph} .js-plotly-plot")
    dash_duo.driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", plot)
    px, py = dash_duo.driver.execute_script(
        "const l = arguments[0]._fullLayout, xa = l['xaxis' + arguments[1]], ya = l['yaxis' + arguments[1]];"
        "return [xa._offset + xa.l2p(arguments[3]), ya._offset + ya.l2p(ya.ticktext.indexOf(arguments[2]))];",
        plot, panel, lane, x)  # fmt: skip
    size = plot.size
    ActionChains(dash_duo.driver).move_to_element_with_offset(plot, int(px - size["width"] / 2), int(py - size["height"] / 2)).click().perform()
